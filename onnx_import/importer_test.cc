#include "onnx_import/importer.h"

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "planner/op_registry.h"

namespace memplan {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(MEMPLAN_MODELS_DIR) + "/" + name + ".onnx";
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A minimal valid model: y = Relu(x), x: [batch, 4].
onnx::ModelProto TinyModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(1);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("relu");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

// `bytes` gzip-compressed, as `gzip` writes them.
std::string Gzip(const std::string& bytes) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sink(&out);
    google::protobuf::io::GzipOutputStream gz(&sink);
    void* data = nullptr;
    int size = 0;
    size_t done = 0;
    while (done < bytes.size() && gz.Next(&data, &size)) {
      const size_t n = std::min(bytes.size() - done, static_cast<size_t>(size));
      std::memcpy(data, bytes.data() + done, n);
      done += n;
      if (n < static_cast<size_t>(size)) gz.BackUp(static_cast<int>(size - n));
    }
    EXPECT_TRUE(gz.Close());
  }
  return out;
}

TEST(ImporterTest, ReadsCalibrationModelWithoutWeights) {
  auto r = ImportOnnxFile(ModelPath("resnet18_train"));
  ASSERT_TRUE(r.ok()) << r.message();
  const Graph& g = r.value();
  EXPECT_EQ(g.Opset(), 20);
  EXPECT_EQ(g.nodes.size(), 179u);
  ASSERT_EQ(g.inputs.size(), 1u);
  const Tensor& x = g.tensors[g.inputs[0]];
  EXPECT_EQ(x.name, "input");
  ASSERT_EQ(x.declared.size(), 4u);
  EXPECT_EQ(x.declared[0].symbol, "batch");
  EXPECT_EQ(x.declared[1].value, 3);
  int w = g.Find("conv1.weight");
  ASSERT_GE(w, 0);
  EXPECT_EQ(g.tensors[w].kind, TensorKind::kInitializer);
  EXPECT_TRUE(g.tensors[w].external);
  EXPECT_EQ(g.tensors[w].declared.size(), 4u);
  EXPECT_EQ(g.tensors[w].declared[0].value, 64);
}

// torch.export names a module buffer's placeholder b_<fqn>; the dynamo
// exporter keeps it in the reading node's fx_node metadata.
TEST(ImporterTest, MarksModuleBuffersTheExporterRecorded) {
  auto r = ImportOnnxFile(ModelPath("llama_gqa_train"));
  ASSERT_TRUE(r.ok()) << r.message();
  const Graph& g = r.value();
  const int inv_freq = g.Find("m.model.rotary_emb.inv_freq");
  ASSERT_GE(inv_freq, 0);
  EXPECT_TRUE(g.tensors[inv_freq].exported_buffer);
  const int q = g.Find("m.model.layers.0.self_attn.q_proj.weight");
  ASSERT_GE(q, 0);
  EXPECT_FALSE(g.tensors[q].exported_buffer);
}

// The dynamo exporter's record of the PyTorch ops, counted once per FX node
// (one op can become several ONNX nodes), and the innermost module classes.
TEST(ImporterTest, RecordsTheExportersPyTorchOps) {
  auto train = ImportOnnxFile(ModelPath("resnet18_train"));
  ASSERT_TRUE(train.ok()) << train.message();
  const ExporterRecord& t = train->exporter;
  EXPECT_GT(t.fx_nodes, 0);
  ASSERT_TRUE(t.aten_ops.count("aten._native_batch_norm_legit_functional.default"));
  EXPECT_EQ(t.aten_ops.at("aten._native_batch_norm_legit_functional.default"), 20);
  EXPECT_EQ(t.aten_ops.count("aten._native_batch_norm_legit_no_training.default"), 0u);
  EXPECT_EQ(t.module_classes.at("torch.nn.modules.batchnorm.BatchNorm2d"), 20);
  // The eval export folds batch norm into the convolutions (several ONNX
  // nodes per batch norm): still 20.
  auto eval = ImportOnnxFile(ModelPath("resnet18"));
  ASSERT_TRUE(eval.ok()) << eval.message();
  EXPECT_EQ(eval->exporter.aten_ops.at("aten._native_batch_norm_legit_no_training.default"), 20);
  // nn.Dropout(p=0.0) in training exports a clone inside the module.
  auto vit = ImportOnnxFile(ModelPath("vit_b_16_train"));
  ASSERT_TRUE(vit.ok()) << vit.message();
  EXPECT_GT(vit->exporter.module_classes.at("torch.nn.modules.dropout.Dropout"), 0);
  // The TorchScript exporter records none.
  auto ts = ImportOnnxFile(ModelPath("resnet50_train_ts"));
  ASSERT_TRUE(ts.ok()) << ts.message();
  EXPECT_EQ(ts->exporter.fx_nodes, 0);
  EXPECT_TRUE(ts->exporter.aten_ops.empty());
}

// The Slices and Squeezes one `qkv.unbind(0)` became share a call number;
// each call is its own (clip_n: 6 image and 4 text blocks, three outputs each).
TEST(ImporterTest, NumbersTheNodesOfEachUnbindCall) {
  auto r = ImportOnnxFile(ModelPath("clip_n_train"));
  ASSERT_TRUE(r.ok()) << r.message();
  std::map<int, int> slices;  // call -> Slice nodes
  for (const Node& n : r->nodes) {
    if (n.unbind_call >= 0 && n.op_type == "Slice") ++slices[n.unbind_call];
  }
  EXPECT_EQ(slices.size(), 10u);
  for (const auto& [call, count] : slices) EXPECT_EQ(count, 3) << call;
  auto resnet = ImportOnnxFile(ModelPath("resnet18_train"));
  ASSERT_TRUE(resnet.ok()) << resnet.message();
  for (const Node& n : resnet->nodes) EXPECT_EQ(n.unbind_call, -1) << n.name;
}

// softmax(x, -1, dtype=torch.float32), which the dynamo exporter writes as a
// Softmax and a Cast from one FX node: both get that call's number; a
// softmax without a dtype and other nodes get none.
TEST(ImporterTest, NumbersTheNodesOfASoftmaxWithADtype) {
  onnx::ModelProto m = TinyModel();
  auto* g = m.mutable_graph();
  g->clear_output();
  auto add_node = [&](const char* op, const char* name, const char* in, const char* out,
                      const std::string& fx) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    n->add_input(in);
    n->add_output(out);
    if (op == std::string("Cast")) {
      auto* to = n->add_attribute();
      to->set_name("to");
      to->set_type(onnx::AttributeProto::INT);
      to->set_i(1);
    }
    // NodeProto.metadata_props (field 9) is newer than Debian's schema.
    onnx::StringStringEntryProto meta;
    meta.set_key("pkg.torch.onnx.fx_node");
    meta.set_value(fx);
    n->GetReflection()->MutableUnknownFields(n)->AddLengthDelimited(9, meta.SerializeAsString());
  };
  const std::string with_dtype =
      "%softmax : [num_users=1] = call_function[target=torch.ops.aten.softmax.int](args = (%y, "
      "-1, torch.float32), kwargs = {})";
  const std::string without =
      "%softmax_1 : [num_users=1] = call_function[target=torch.ops.aten.softmax.int](args = "
      "(%p, -1), kwargs = {})";
  add_node("Softmax", "node_Softmax_1", "y", "s", with_dtype);
  add_node("Cast", "node_softmax", "s", "p", with_dtype);
  add_node("Softmax", "node_softmax_1", "p", "q", without);
  g->add_output()->set_name("q");
  auto r = ImportOnnxBytes(m.SerializeAsString(), "softmax.onnx");
  ASSERT_TRUE(r.ok()) << r.message();
  std::map<std::string, int> call;
  for (const Node& n : r->nodes) call[n.name] = n.softmax_dtype_call;
  EXPECT_GE(call.at("node_Softmax_1"), 0);
  EXPECT_EQ(call.at("node_softmax"), call.at("node_Softmax_1"));
  EXPECT_EQ(call.at("node_softmax_1"), -1);
  EXPECT_EQ(call.at("relu"), -1);
}

std::vector<std::vector<std::string>> TargetsOf(const std::string& line) {
  const PyStatement st = ParsePyStatement(line);
  EXPECT_EQ(st.kind, PyStatement::Kind::kAssign) << line;
  return st.targets;
}

PyStatement::Kind KindOf(const std::string& line) { return ParsePyStatement(line).kind; }

using Targets = std::vector<std::vector<std::string>>;

TEST(ParsePyStatement, ReadsTheTargetsOfAnAssignment) {
  EXPECT_EQ(TargetsOf("x = self.patch(x).flatten(2).transpose(1, 2)"), (Targets{{"x"}}));
  EXPECT_EQ(
      TargetsOf("    q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, self.heads, -1)).permute("),
      (Targets{{"q", "k", "v"}}));
  EXPECT_EQ(TargetsOf("attn_output, _ = self.attn("), (Targets{{"attn_output", "_"}}));
  EXPECT_EQ(TargetsOf("outputs: BaseModelOutputWithPast = self.model("), (Targets{{"outputs"}}));
  EXPECT_EQ(TargetsOf("inputs_embeds: torch.Tensor = self.embed_tokens(input_ids)"),
            (Targets{{"inputs_embeds"}}));
  EXPECT_EQ(TargetsOf("query = key = value = query.transpose(1, 0)"),
            (Targets{{"query"}, {"key"}, {"value"}}));
  EXPECT_EQ(TargetsOf("hidden_states += residual"), (Targets{{"hidden_states"}}));
  EXPECT_EQ(TargetsOf("x >>= 1"), (Targets{{"x"}}));
  EXPECT_EQ(TargetsOf("(a, b) = f(x)  # comment = here"), (Targets{{"a", "b"}}));
  EXPECT_EQ(TargetsOf("a, = f(x)"), (Targets{{"a"}}));
  // Targets that are no plain local name keep their place, empty.
  EXPECT_EQ(TargetsOf("self.cache, x[0], *rest, y = f(x)"), (Targets{{"", "", "", "y"}}));
  EXPECT_EQ(TargetsOf("mask = (x == 0) | (y <= 1) & (z != 2)"), (Targets{{"mask"}}));
  EXPECT_EQ(TargetsOf("s = f(key='a=b', n=3)"), (Targets{{"s"}}));
}

TEST(ParsePyStatement, TellsReturnsAndStatementsThatBindNothing) {
  EXPECT_EQ(KindOf("return F.linear(input, self.weight, self.bias)"), PyStatement::Kind::kReturn);
  EXPECT_EQ(KindOf("return x + self.mlp(self.ln2(x))"), PyStatement::Kind::kReturn);
  EXPECT_EQ(KindOf("hidden_states.add_(residual)"), PyStatement::Kind::kOther);
  EXPECT_EQ(KindOf("if x.shape[0] == 1:"), PyStatement::Kind::kOther);
  EXPECT_EQ(KindOf("for blk in self.blocks:"), PyStatement::Kind::kOther);
  EXPECT_EQ(KindOf("a: torch.Tensor"), PyStatement::Kind::kOther);
  EXPECT_EQ(KindOf("returned = x"), PyStatement::Kind::kAssign);
}

// A float32 copy read within its own line (T5LayerNorm's square) is told
// from one a line binds to a name (LlamaRMSNorm's `x = x.to(torch.float32)`).
TEST(ParsePyStatement, TellsAnUpcastReadWithinTheLine) {
  EXPECT_TRUE(
      ParsePyStatement("variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)")
          .upcasts_inline);
  EXPECT_TRUE(ParsePyStatement("output = self._norm(x.float())").upcasts_inline);
  EXPECT_TRUE(ParsePyStatement("y = x.to(dtype=torch.float32) * w").upcasts_inline);
  EXPECT_FALSE(ParsePyStatement("hidden_states = hidden_states.to(torch.float32)").upcasts_inline);
  EXPECT_FALSE(ParsePyStatement("x = x.float()  # upcast").upcasts_inline);
  EXPECT_FALSE(
      ParsePyStatement("variance = hidden_states.pow(2).mean(-1, keepdim=True)").upcasts_inline);
  EXPECT_FALSE(ParsePyStatement("y = x.to(torch.float16).pow(2)").upcasts_inline);
}

TEST(ParsePyStatement, FindsTheContainersACatJoins) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(ParsePyStatement(
                "hidden_states = self.linear_fuse(torch.cat(all_hidden_states[::-1], dim=1))")
                .joined,
            (Names{"all_hidden_states"}));
  EXPECT_EQ(ParsePyStatement("return torch.stack(outs)").joined, (Names{"outs"}));
  EXPECT_EQ(ParsePyStatement("res = torch.cat(res, dim=1)").joined, (Names{"res"}));
  EXPECT_EQ(ParsePyStatement("y = torch.concat( feats , 1)").joined, (Names{"feats"}));
  // A list built on the line, a call's result, other functions: no container.
  EXPECT_TRUE(ParsePyStatement("h = torch.cat([h, hs.pop()], dim=1)").joined.empty());
  EXPECT_TRUE(ParsePyStatement("x = torch.cat((-x2, x1), dim=-1)").joined.empty());
  EXPECT_TRUE(ParsePyStatement("y = torch.cat(x.split(2), 1)").joined.empty());
  EXPECT_TRUE(ParsePyStatement("y = my_concat(feats)").joined.empty());
  EXPECT_TRUE(ParsePyStatement("    feats,").joined.empty());  // a continuation line
}

TEST(ParsePyStatement, ContinuationLinesAreUnknown) {
  // Lines of a statement an earlier line started: keyword arguments, a
  // closing bracket, a leading operator.
  EXPECT_EQ(KindOf("    attention_mask=causal_mask,"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("hidden_states=self.ln(hidden_states)"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("            2, 0, 3, 1, 4).unbind(0)"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("x = f(a))"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("    + self.bias"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf(".transpose(1, 2)"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("else self.default"), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf(""), PyStatement::Kind::kUnknown);
  EXPECT_EQ(KindOf("s = 'unterminated"), PyStatement::Kind::kUnknown);
}

TEST(ParseStackTrace, ReadsEveryFrameAndItsStatement) {
  const std::string trace =
      "File \"/work/bench/families.py\", line 487, in forward\n"
      "    img = F.normalize(self.visual(image), dim=-1)\n"
      "  File \"/work/bench/families.py\", line 429, in forward\n"
      "    q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, self.heads, -1)).permute(\n"
      "  File \"/opt/torch/nn/modules/linear.py\", line 134, in forward\n"
      "    return F.linear(input, self.weight, self.bias)";
  const std::vector<SourceFrame> f = ParseStackTrace(trace);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].file, "/work/bench/families.py");
  EXPECT_EQ(f[0].line, 487);
  EXPECT_EQ(f[0].function, "forward");
  EXPECT_EQ(f[0].statement.targets, (Targets{{"img"}}));
  EXPECT_EQ(f[1].line, 429);
  EXPECT_EQ(f[1].statement.targets, (Targets{{"q", "k", "v"}}));
  EXPECT_EQ(f[2].file, "/opt/torch/nn/modules/linear.py");
  EXPECT_EQ(f[2].statement.kind, PyStatement::Kind::kReturn);
  EXPECT_TRUE(ParseStackTrace("").empty());
  EXPECT_TRUE(ParseStackTrace("File \"x.py\", line").empty());
}

// The dynamo exporter's stack traces become Node::stack: one frame per
// module call plus the root's; a TorchScript export has none.
TEST(ImporterTest, ReadsTheExportersStackTraces) {
  auto clip = ImportOnnxFile(ModelPath("clip_n_train"));
  ASSERT_TRUE(clip.ok()) << clip.message();
  int with_stack = 0, qkv = 0;
  for (const Node& n : clip->nodes) {
    if (n.stack < 0) continue;
    ++with_stack;
    const std::vector<int>& st = clip->stacks[n.stack];
    ASSERT_EQ(st.size(), n.modules.size() + 1) << n.name;
    for (int f : st) {
      const SourceFrame& fr = clip->frames[f];
      if (fr.statement.targets == Targets{{"q", "k", "v"}}) ++qkv;
    }
  }
  EXPECT_GT(with_stack, static_cast<int>(clip->nodes.size()) * 9 / 10);
  EXPECT_GT(qkv, 0);
  auto ts = ImportOnnxFile(ModelPath("bert_base_train_ts"));
  ASSERT_TRUE(ts.ok()) << ts.message();
  EXPECT_TRUE(ts->stacks.empty());
  for (const Node& n : ts->nodes) EXPECT_EQ(n.stack, -1);
}

// A module the exporter traced into a subgraph (transformers' rotary
// embedding under torch.no_grad()) carries the subgraph's generated frame:
// Node::fx_region names it; its ops have no Node::stack.
TEST(ImporterTest, MarksNodesOfATracedRegion) {
  auto llama = ImportOnnxFile(ModelPath("llama_gqa_train"));
  ASSERT_TRUE(llama.ok()) << llama.message();
  int in_region = 0;
  for (const Node& n : llama->nodes) {
    if (n.fx_region.empty()) continue;
    ++in_region;
    EXPECT_EQ(n.fx_region.rfind("<eval_with_key>", 0), 0u) << n.name;
    EXPECT_EQ(n.stack, -1) << n.name;
    EXPECT_NE(n.scope.find("rotary_emb"), std::string::npos) << n.name << " in " << n.scope;
  }
  EXPECT_GT(in_region, 3);
  auto clip = ImportOnnxFile(ModelPath("clip_n_train"));
  ASSERT_TRUE(clip.ok()) << clip.message();
  for (const Node& n : clip->nodes) EXPECT_TRUE(n.fx_region.empty()) << n.name;
}

// transformers' activation modules (SiLUActivation) take no `inplace`
// argument: their nodes are marked; torch.nn's (ReLU(inplace=True)) are not.
TEST(ImporterTest, MarksActivationModulesThatNeverRunInPlace) {
  auto llama = ImportOnnxFile(ModelPath("llama_gqa_train"));
  ASSERT_TRUE(llama.ok()) << llama.message();
  int marked = 0;
  for (const Node& n : llama->nodes) {
    if (!n.runs_out_of_place) continue;
    ++marked;
    EXPECT_TRUE(n.op_type == "Sigmoid" || n.op_type == "Mul") << n.name << " " << n.op_type;
    EXPECT_NE(n.scope.find("mlp.act_fn"), std::string::npos) << n.name << " in " << n.scope;
  }
  EXPECT_GT(marked, 0);
  auto resnet = ImportOnnxFile(ModelPath("resnet18_train"));
  ASSERT_TRUE(resnet.ok()) << resnet.message();
  int relus = 0;
  for (const Node& n : resnet->nodes) {
    EXPECT_FALSE(n.runs_out_of_place) << n.name;
    relus += n.op_type == "Relu";
  }
  EXPECT_GT(relus, 0);
}

// transformers' rotary embeddings turn autocast off ("Force float32"): the
// nodes of LlamaRotaryEmbedding are marked, and no other.
TEST(ImporterTest, MarksRotaryEmbeddingsThatTurnAutocastOff) {
  auto llama = ImportOnnxFile(ModelPath("llama_gqa_train"));
  ASSERT_TRUE(llama.ok()) << llama.message();
  int marked = 0, matmuls = 0;
  for (const Node& n : llama->nodes) {
    if (!n.autocast_disabled) continue;
    ++marked;
    matmuls += n.op_type == "MatMul";
    EXPECT_NE(n.scope.find("rotary_emb"), std::string::npos) << n.name << " in " << n.scope;
  }
  EXPECT_EQ(matmuls, 1);
  EXPECT_GT(marked, 2);
  EXPECT_TRUE(
      ModuleDisablesAutocast("transformers.models.qwen2.modeling_qwen2.Qwen2RotaryEmbedding"));
  EXPECT_FALSE(ModuleDisablesAutocast("mylib.RotaryEmbedding"));
  EXPECT_FALSE(ModuleDisablesAutocast("transformers.models.llama.modeling_llama.LlamaAttention"));
  EXPECT_FALSE(ModuleDisablesAutocast("RotaryEmbedding"));
}

TEST(ImporterTest, KeepsSmallIntegerConstants) {
  auto r = ImportOnnxFile(ModelPath("gpt2_train"));
  ASSERT_TRUE(r.ok()) << r.message();
  const Graph& g = r.value();
  int found = 0;
  for (const Node& n : g.nodes) {
    if (n.op_type != "Constant") continue;
    auto it = n.attrs.find("value_ints");
    if (it != n.attrs.end()) ++found;
  }
  EXPECT_GT(found, 10);
}

TEST(ImporterTest, AllCalibrationModelsImport) {
  for (const char* name :
       {"resnet18", "resnet18_train", "resnet50", "resnet50_train", "resnet50_train_ts",
        "mobilenet_v2", "mobilenet_v2_train", "mobilenet_v2_train_ts", "vit_b_16", "vit_b_16_train",
        "bert_base", "bert_base_train", "bert_base_train_ts", "gpt2", "gpt2_train"}) {
    auto r = ImportOnnxFile(ModelPath(name));
    EXPECT_TRUE(r.ok()) << name << ": " << r.message();
  }
}

TEST(ImporterTest, RejectsNonProtobuf) {
  auto r = ImportOnnxBytes("this is not a model at all\n", "bad.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "bad.onnx: not a valid ONNX model (protobuf parse failed: "
            "truncated or not ONNX)");
}

TEST(ImporterTest, RejectsTruncatedFile) {
  std::string bytes = ReadAll(ModelPath("resnet18"));
  auto r = ImportOnnxBytes(bytes.substr(0, bytes.size() / 2), "cut.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message().rfind("cut.onnx: ", 0), 0u) << r.message();
}

TEST(ImporterTest, ReadsAGzipCompressedModelAsTheModel) {
  const std::string bytes = ReadAll(ModelPath("resnet18_train"));
  const std::string gz = Gzip(bytes);
  ASSERT_LT(gz.size(), bytes.size());
  auto plain = ImportOnnxBytes(bytes, "m.onnx");
  auto packed = ImportOnnxBytes(gz, "m.onnx.gz");
  ASSERT_TRUE(plain.ok()) << plain.message();
  ASSERT_TRUE(packed.ok()) << packed.message();
  ASSERT_EQ(packed->nodes.size(), plain->nodes.size());
  ASSERT_EQ(packed->tensors.size(), plain->tensors.size());
  for (size_t i = 0; i < plain->tensors.size(); ++i) {
    EXPECT_EQ(packed->tensors[i].name, plain->tensors[i].name);
    EXPECT_EQ(packed->tensors[i].declared.size(), plain->tensors[i].declared.size());
  }
  // From a file too (the magic number, not the name, decides).
  const std::string path = ::testing::TempDir() + "/gzip_model.onnx";
  std::ofstream(path, std::ios::binary) << gz;
  auto file = ImportOnnxFile(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->nodes.size(), plain->nodes.size());
}

TEST(ImporterTest, RejectsTruncatedOrCorruptGzip) {
  const std::string gz = Gzip(ReadAll(ModelPath("resnet18")));
  auto cut = ImportOnnxBytes(gz.substr(0, gz.size() / 2), "cut.onnx.gz");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.message(),
            "cut.onnx.gz: not a valid ONNX model once decompressed (protobuf parse failed: the "
            "gzip data is truncated or holds no ONNX model)");
  std::string bad = gz;
  bad[2] = 0;  // compression method 0: not deflate
  auto corrupt = ImportOnnxBytes(bad, "bad.onnx.gz");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.message().rfind("bad.onnx.gz: gzip data is truncated or corrupt (zlib: ", 0),
            0u)
      << corrupt.message();
}

// The file-size limit bounds the inflated bytes: a model with 16 MiB of
// doc string compresses to a few KiB and parses under the default limit,
// not under a 1 MiB one.
TEST(ImporterTest, BoundsWhatAGzipFileInflatesTo) {
  onnx::ModelProto m = TinyModel();
  m.set_doc_string(std::string(16 << 20, 'a'));
  const std::string gz = Gzip(m.SerializeAsString());
  ASSERT_LT(gz.size(), 1u << 20);
  auto unbounded = ImportOnnxBytes(gz, "big.onnx.gz");
  EXPECT_TRUE(unbounded.ok()) << unbounded.message();
  ImportLimits limits;
  limits.max_file_bytes = 1 << 20;
  auto bounded = ImportOnnxBytes(gz, "big.onnx.gz", limits);
  ASSERT_FALSE(bounded.ok());
  EXPECT_EQ(bounded.message(), "big.onnx.gz: decompresses to more than 1048576 bytes");
}

TEST(ImporterTest, RejectsEmptyFile) {
  auto r = ImportOnnxBytes("", "empty.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "empty.onnx: empty file: not an ONNX model");
}

TEST(ImporterTest, RejectsMissingFile) {
  auto r = ImportOnnxFile("/nonexistent/model.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "/nonexistent/model.onnx: cannot open file");
}

TEST(ImporterTest, RejectsEmptyGraph) {
  onnx::ModelProto m = TinyModel();
  m.mutable_graph()->clear_node();
  m.mutable_graph()->clear_output();
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(), "m.onnx: the graph has no nodes");
}

TEST(ImporterTest, RejectsUnknownDtype) {
  onnx::ModelProto m = TinyModel();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(99);
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(), "m.onnx: tensor 'x': unknown data type 99");
}

TEST(ImporterTest, RejectsNegativeDim) {
  onnx::ModelProto m = TinyModel();
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_value(-3);
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(), "m.onnx: tensor 'x': negative dim -3");
}

TEST(ImporterTest, RejectsUnsupportedOpset) {
  onnx::ModelProto m = TinyModel();
  m.mutable_opset_import(0)->set_version(99);
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(), "m.onnx: opset 99 is not supported (7 to 23)");
  m.clear_opset_import();
  auto r2 = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r2.message(), "m.onnx: no default-domain (ai.onnx) opset import");
}

TEST(ImporterTest, RejectsDuplicateProducer) {
  onnx::ModelProto m = TinyModel();
  *m.mutable_graph()->add_node() = m.graph().node(0);
  m.mutable_graph()->mutable_node(1)->set_name("relu2");
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(), "m.onnx: node 'relu2': output 'y' is already produced by node 'relu'");
}

TEST(ImporterTest, RejectsInitializerOverflow) {
  onnx::ModelProto m = TinyModel();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("w");
  init->set_data_type(1);
  init->add_dims(int64_t{1} << 40);
  init->add_dims(int64_t{1} << 40);
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  EXPECT_EQ(r.message(),
            "m.onnx: initializer 'w': size of [1099511627776, 1099511627776] overflows int64");
}

TEST(ImporterTest, NeverOpensExternalData) {
  onnx::ModelProto m = TinyModel();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("w");
  init->set_data_type(1);
  init->add_dims(1024);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("../../etc/passwd");
  auto r = ImportOnnxBytes(m.SerializeAsString(), "m.onnx");
  ASSERT_TRUE(r.ok()) << r.message();
  const int id = r.value().Find("w");
  const Tensor& w = r.value().tensors[id];
  EXPECT_TRUE(w.external);
  ASSERT_EQ(r.value().external_locations.count(id), 1u);
  EXPECT_EQ(r.value().external_locations.at(id), "../../etc/passwd");
  EXPECT_FALSE(w.has_values);
}

TEST(ImporterTest, LimitsSubgraphDepth) {
  onnx::ModelProto m = TinyModel();
  // Wrap the Relu in 20 nested If bodies.
  onnx::GraphProto body = m.graph();
  for (int i = 0; i < 20; ++i) {
    onnx::GraphProto outer;
    outer.set_name("g" + std::to_string(i));
    auto* n = outer.add_node();
    n->set_op_type("If");
    n->set_name("if" + std::to_string(i));
    n->add_input("c");
    n->add_output("y");
    auto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body;
    outer.add_output()->set_name("y");
    body = outer;
  }
  *m.mutable_graph() = body;
  auto r = ImportOnnxBytes(m.SerializeAsString(), "deep.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("subgraphs nested deeper than 16 levels"), std::string::npos)
      << r.message();
}

}  // namespace
}  // namespace memplan
