#include "onnx_import/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "onnx/onnx_pb.h"
#include "planner/checked.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

// Shared state of one import: the file name for messages and the limits.
struct Importer {
  std::string source;
  ImportLimits limits;
  int64_t total_nodes = 0;

  Status Error(const std::string& what) const { return Status::Error(source + ": " + what); }

  /// Names end up in messages and output: no control characters (a newline
  /// or an escape sequence in a name could forge lines in a CI log).
  Status CheckName(const std::string& name, const std::string& what) const {
    for (char c : name) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        return Error(what + " '" + name + "' contains a control character");
      }
    }
    return Status();
  }
};

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = static_cast<float>(mant) / 1024.0f / 16384.0f;
  } else if (exp == 31) {
    v = mant ? 0.0f / 0.0f : 1.0f / 0.0f;
  } else {
    v = (1.0f + static_cast<float>(mant) / 1024.0f) *
        static_cast<float>(exp >= 15 ? (1 << (exp - 15)) : 1.0 / (1 << (15 - exp)));
  }
  return sign ? -v : v;
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename T>
T ReadLE(const std::string& raw, size_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Decodes a small tensor's data into int64 values (integers/bool) or double
// values (floats). Returns false when the data is absent or inconsistent.
bool DecodeSmall(const onnx::TensorProto& t, int64_t numel, std::vector<int64_t>* ints,
                 std::vector<double>* floats) {
  const DType dt = static_cast<DType>(t.data_type());
  const std::string& raw = t.raw_data();
  const bool has_raw = t.has_raw_data();
  const size_t n = static_cast<size_t>(numel);
  auto raw_ok = [&](size_t width) { return has_raw && raw.size() == n * width; };
  ints->clear();
  floats->clear();
  switch (dt) {
    case DType::kInt64:
      if (raw_ok(8)) {
        for (size_t i = 0; i < n; ++i) ints->push_back(ReadLE<int64_t>(raw, i));
      } else if (!has_raw && static_cast<size_t>(t.int64_data_size()) == n) {
        ints->assign(t.int64_data().begin(), t.int64_data().end());
      } else {
        return false;
      }
      return true;
    case DType::kUint64:
      if (raw_ok(8)) {
        for (size_t i = 0; i < n; ++i)
          ints->push_back(static_cast<int64_t>(ReadLE<uint64_t>(raw, i)));
      } else if (!has_raw && static_cast<size_t>(t.uint64_data_size()) == n) {
        for (uint64_t v : t.uint64_data()) ints->push_back(static_cast<int64_t>(v));
      } else {
        return false;
      }
      return true;
    case DType::kInt32:
    case DType::kUint32:
    case DType::kInt16:
    case DType::kUint16:
    case DType::kInt8:
    case DType::kUint8:
    case DType::kBool: {
      const int width = DTypeBits(dt) / 8;
      if (raw_ok(width)) {
        for (size_t i = 0; i < n; ++i) {
          int64_t v = 0;
          switch (dt) {
            case DType::kInt32:
              v = ReadLE<int32_t>(raw, i);
              break;
            case DType::kUint32:
              v = ReadLE<uint32_t>(raw, i);
              break;
            case DType::kInt16:
              v = ReadLE<int16_t>(raw, i);
              break;
            case DType::kUint16:
              v = ReadLE<uint16_t>(raw, i);
              break;
            case DType::kInt8:
              v = ReadLE<int8_t>(raw, i);
              break;
            default:
              v = ReadLE<uint8_t>(raw, i);
              break;
          }
          ints->push_back(v);
        }
      } else if (!has_raw && static_cast<size_t>(t.int32_data_size()) == n) {
        ints->assign(t.int32_data().begin(), t.int32_data().end());
      } else {
        return false;
      }
      return true;
    }
    case DType::kFloat:
      if (raw_ok(4)) {
        for (size_t i = 0; i < n; ++i) floats->push_back(ReadLE<float>(raw, i));
      } else if (!has_raw && static_cast<size_t>(t.float_data_size()) == n) {
        floats->assign(t.float_data().begin(), t.float_data().end());
      } else {
        return false;
      }
      return true;
    case DType::kDouble:
      if (raw_ok(8)) {
        for (size_t i = 0; i < n; ++i) floats->push_back(ReadLE<double>(raw, i));
      } else if (!has_raw && static_cast<size_t>(t.double_data_size()) == n) {
        floats->assign(t.double_data().begin(), t.double_data().end());
      } else {
        return false;
      }
      return true;
    case DType::kFloat16:
    case DType::kBFloat16: {
      auto conv = [&](uint16_t b) {
        return dt == DType::kFloat16 ? HalfToFloat(b) : Bf16ToFloat(b);
      };
      if (raw_ok(2)) {
        for (size_t i = 0; i < n; ++i) floats->push_back(conv(ReadLE<uint16_t>(raw, i)));
      } else if (!has_raw && static_cast<size_t>(t.int32_data_size()) == n) {
        for (int32_t v : t.int32_data()) floats->push_back(conv(static_cast<uint16_t>(v)));
      } else {
        return false;
      }
      return true;
    }
    default:
      return false;
  }
}

std::string DimsText(const std::vector<int64_t>& d) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
  os << "]";
  return os.str();
}

std::string DeclaredText(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].known() ? std::to_string(dims[i].value)
                         : (dims[i].symbol.empty() ? "?" : dims[i].symbol);
  }
  return s + "]";
}

// Reads a TensorProto's dtype and dims (and small data) into the fields of
// an Attribute-like destination.
struct TensorInfo {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  bool has_values = false;
  std::vector<int64_t> values;
  std::vector<double> fvalues;
  bool external = false;
  std::string location;
};

Status ReadTensorProto(const Importer& im, const onnx::TensorProto& t, const std::string& what,
                       TensorInfo* out) {
  if (!IsKnownDType(t.data_type())) {
    return im.Error(what + ": unknown data type " + std::to_string(t.data_type()));
  }
  out->dtype = static_cast<DType>(t.data_type());
  out->dims.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : out->dims) {
    if (d < 0) return im.Error(what + ": negative dim in " + DimsText(out->dims));
  }
  int64_t numel = 0;
  int64_t bytes = 0;
  if (!CheckedNumel(out->dims, &numel) || !DTypeBytes(out->dtype, numel, &bytes)) {
    return im.Error(what + ": size of " + DimsText(out->dims) + " overflows int64");
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    out->external = true;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") out->location = kv.value();
    }
    return Status();
  }
  if (t.has_raw_data() && static_cast<int64_t>(t.raw_data().size()) != bytes &&
      out->dtype != DType::kString) {
    return im.Error(what + ": raw_data has " + std::to_string(t.raw_data().size()) + " bytes but " +
                    DimsText(out->dims) + " of " + DTypeName(out->dtype) + " needs " +
                    std::to_string(bytes));
  }
  if (numel <= im.limits.max_value_elements) {
    out->has_values = DecodeSmall(t, numel, &out->values, &out->fvalues);
    if (out->has_values && out->values.empty() && !out->fvalues.empty()) {
      // Float data: keep doubles only; integer values stay empty.
      out->has_values = false;
    }
  }
  return Status();
}

Status ReadType(const Importer& im, const onnx::TypeProto& type, const std::string& name,
                Tensor* t) {
  const onnx::TypeProto* tt = &type;
  if (type.has_sequence_type()) {
    t->is_sequence = true;
    tt = &type.sequence_type().elem_type();
  } else if (type.has_optional_type()) {
    tt = &type.optional_type().elem_type();
  }
  if (!tt->has_tensor_type()) return Status();  // Maps etc.: no shape to check.
  const auto& tensor_type = tt->tensor_type();
  if (tensor_type.has_elem_type() && tensor_type.elem_type() != 0) {
    if (!IsKnownDType(tensor_type.elem_type())) {
      return im.Error("tensor '" + name + "': unknown data type " +
                      std::to_string(tensor_type.elem_type()));
    }
    const DType dt = static_cast<DType>(tensor_type.elem_type());
    if (t->dtype != DType::kUndefined && t->dtype != dt) {
      return im.Error("tensor '" + name + "': declared as " + DTypeName(t->dtype) + " and as " +
                      DTypeName(dt));
    }
    t->dtype = dt;
  }
  if (!tensor_type.has_shape() || t->is_sequence) return Status();
  std::vector<Dim> declared;
  for (const auto& d : tensor_type.shape().dim()) {
    Dim dim;
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) {
        return im.Error("tensor '" + name + "': negative dim " + std::to_string(d.dim_value()));
      }
      dim.value = d.dim_value();
    } else if (d.has_dim_param()) {
      Status name_ok = im.CheckName(d.dim_param(), "tensor '" + name + "': dim symbol");
      if (!name_ok.ok()) return name_ok;
      dim.symbol = d.dim_param();
    }
    declared.push_back(dim);
  }
  // Declared twice (value_info and graph output, or value_info for an
  // initializer): the two must agree, else one of them would be silently
  // ignored. An initializer's own dims always win.
  if (t->has_declared) {
    bool agree = t->declared.size() == declared.size();
    for (size_t k = 0; agree && k < declared.size(); ++k) {
      const Dim& a = t->declared[k];
      const Dim& b = declared[k];
      if (a.known() && b.known()) agree = a.value == b.value;
      if (!a.known() && !b.known() && !a.symbol.empty() && !b.symbol.empty()) {
        agree = a.symbol == b.symbol;
      }
    }
    if (!agree) {
      return im.Error("tensor '" + name + "': declared as " + DeclaredText(t->declared) +
                      " and as " + DeclaredText(declared));
    }
  }
  if (t->kind == TensorKind::kInitializer) return Status();
  if (t->has_declared) {  // They agree: keep the more precise of each dim.
    for (size_t k = 0; k < declared.size(); ++k) {
      if (!declared[k].known() && t->declared[k].known()) declared[k] = t->declared[k];
      if (declared[k].symbol.empty() && !declared[k].known()) declared[k] = t->declared[k];
    }
  }
  t->has_declared = true;
  t->declared = std::move(declared);
  return Status();
}

Status ImportGraph(Importer* im, const onnx::GraphProto& gp, int depth, Graph* g);

// The modules a node runs inside, outermost first, and its module path: the
// dynamo exporter's name scopes (['', 'm', 'm.transformer', ...,
// 'm.transformer.h.0.attn', 'addmm']), or a TorchScript-style name
// ("/layer1/layer1.0/conv1/Conv" -> layer1, layer1.0, layer1.0.conv1). Sets
// *eval_op when the exporter recorded an eval-only op (batch norm without
// training statistics).
void ReadModules(const onnx::NodeProto& np, Node* n, bool* eval_op) {
  // NodeProto.metadata_props (field 9, IR 10) is newer than Debian's schema:
  // read it from the unknown fields, parsing only the entries we use.
  static const std::string kScopes = "pkg.torch.onnx.name_scopes";
  const auto& unknown = np.GetReflection()->GetUnknownFields(np);
  bool found = false;
  for (int f = 0; f < unknown.field_count(); ++f) {
    const auto& field = unknown.field(f);
    if (field.number() != 9 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const std::string& raw = field.length_delimited();
    if (raw.find("_native_batch_norm_legit_no_training") != std::string::npos) *eval_op = true;
    if (found || raw.find(kScopes) == std::string::npos) continue;
    onnx::StringStringEntryProto kv;
    if (!kv.ParseFromString(raw) || kv.key() != kScopes) continue;
    // A Python list of quoted strings: the root module '', the called
    // modules, then the op. Entries the exporter adds for ops outside any
    // module ("_empty_nn_module_stack...") are not modules.
    const std::string& v = kv.value();
    std::vector<std::string> strings;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != '\'' && v[i] != '"') continue;
      const char q = v[i];
      const size_t j = v.find(q, i + 1);
      if (j == std::string::npos) break;
      strings.push_back(v.substr(i + 1, j - i - 1));
      i = j;
    }
    if (!strings.empty()) strings.pop_back();  // the op
    for (std::string& m : strings) {
      if (!m.empty() && m.rfind("_empty_nn_module_stack", 0) != 0)
        n->modules.push_back(std::move(m));
    }
    found = true;
  }
  n->modules_known = found;
  if (!found) {
    const std::string& name = np.name();
    if (name.size() < 2 || name[0] != '/') return;
    n->modules_known = true;
    const size_t last = name.rfind('/');
    const std::string path = name.substr(1, last == 0 ? 0 : last - 1);
    // "/layer1/layer1.0/conv1": each level repeats its parent's prefix.
    std::string out;
    size_t start = 0;
    while (start <= path.size()) {
      size_t slash = path.find('/', start);
      if (slash == std::string::npos) slash = path.size();
      const std::string part = path.substr(start, slash - start);
      if (!part.empty()) {
        if (!out.empty() && part.rfind(out + ".", 0) == 0) {
          out = part;
        } else {
          out = out.empty() ? part : out + "." + part;
        }
        n->modules.push_back(out);
      }
      start = slash + 1;
    }
  }
  if (!n->modules.empty()) n->scope = n->modules.back();
}

Status ReadAttribute(Importer* im, const onnx::AttributeProto& a, const std::string& where,
                     int depth, Attribute* out, Node* node) {
  using AP = onnx::AttributeProto;
  AP::AttributeType type = a.type();
  if (type == AP::UNDEFINED) {  // IR < 2: guess from the field that is set.
    if (a.has_f())
      type = AP::FLOAT;
    else if (a.has_i())
      type = AP::INT;
    else if (a.has_s())
      type = AP::STRING;
    else if (a.has_t())
      type = AP::TENSOR;
    else if (a.has_g())
      type = AP::GRAPH;
    else if (a.floats_size())
      type = AP::FLOATS;
    else if (a.ints_size())
      type = AP::INTS;
    else if (a.strings_size())
      type = AP::STRINGS;
  }
  switch (type) {
    case AP::FLOAT:
      out->type = AttrType::kFloat;
      out->f = a.f();
      break;
    case AP::INT:
      out->type = AttrType::kInt;
      out->i = a.i();
      break;
    case AP::STRING:
      out->type = AttrType::kString;
      out->s = a.s();
      break;
    case AP::FLOATS:
      out->type = AttrType::kFloats;
      out->floats.assign(a.floats().begin(), a.floats().end());
      break;
    case AP::INTS:
      out->type = AttrType::kInts;
      out->ints.assign(a.ints().begin(), a.ints().end());
      break;
    case AP::STRINGS:
      out->type = AttrType::kStrings;
      out->strings.assign(a.strings().begin(), a.strings().end());
      break;
    case AP::TENSOR: {
      out->type = AttrType::kTensor;
      TensorInfo info;
      Status s = ReadTensorProto(*im, a.t(), where + " attribute '" + a.name() + "'", &info);
      if (!s.ok()) return s;
      out->t_dtype = info.dtype;
      out->t_dims = std::move(info.dims);
      out->t_has_values = info.has_values;
      out->t_values = std::move(info.values);
      out->t_fvalues = std::move(info.fvalues);
      break;
    }
    case AP::GRAPH:
    case AP::GRAPHS: {
      out->type = AttrType::kGraph;
      if (depth + 1 > im->limits.max_subgraph_depth) {
        return im->Error(where + ": subgraphs nested deeper than " +
                         std::to_string(im->limits.max_subgraph_depth) + " levels");
      }
      std::vector<const onnx::GraphProto*> bodies;
      if (type == AP::GRAPH) bodies.push_back(&a.g());
      for (const auto& b : a.graphs()) bodies.push_back(&b);
      for (const onnx::GraphProto* b : bodies) {
        auto sub = std::make_shared<Graph>();
        sub->source = im->source;
        Status s = ImportGraph(im, *b, depth + 1, sub.get());
        if (!s.ok()) return s;
      }
      break;
    }
    default:
      out->type = AttrType::kOther;
      break;
  }
  return Status();
}

Status ImportGraph(Importer* im, const onnx::GraphProto& gp, int depth, Graph* g) {
  g->name = gp.name();
  // Initializers first: their dims and dtype; small integer data as values.
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return im->Error("an initializer has no name");
    Status name_ok = im->CheckName(init.name(), "initializer");
    if (!name_ok.ok()) return name_ok;
    if (g->Find(init.name()) >= 0) {
      return im->Error("initializer '" + init.name() + "' is defined twice");
    }
    TensorInfo info;
    Status s = ReadTensorProto(*im, init, "initializer '" + init.name() + "'", &info);
    if (!s.ok()) return s;
    int id = g->FindOrAdd(init.name());
    Tensor& t = g->tensors[id];
    t.kind = TensorKind::kInitializer;
    t.dtype = info.dtype;
    t.has_declared = true;
    for (int64_t d : info.dims) t.declared.push_back(Dim{d, ""});
    t.has_values = info.has_values;
    t.values = std::move(info.values);
    t.external = info.external;
    t.external_location = std::move(info.location);
    g->initializers.push_back(id);
  }
  for (const auto& sp : gp.sparse_initializer()) {
    return im->Error("sparse initializer '" + sp.values().name() + "' is not supported");
  }
  for (const auto& in : gp.input()) {
    if (in.name().empty()) return im->Error("a graph input has no name");
    Status name_ok = im->CheckName(in.name(), "graph input");
    if (!name_ok.ok()) return name_ok;
    int existing = g->Find(in.name());
    if (existing >= 0 && g->tensors[existing].kind == TensorKind::kInitializer) {
      continue;  // IR < 4 lists initializers as inputs too.
    }
    if (existing >= 0) return im->Error("graph input '" + in.name() + "' is listed twice");
    int id = g->FindOrAdd(in.name());
    Tensor& t = g->tensors[id];
    t.kind = TensorKind::kGraphInput;
    Status s = ReadType(*im, in.type(), in.name(), &t);
    if (!s.ok()) return s;
    if (depth == 0 && t.dtype == DType::kUndefined) {
      return im->Error("graph input '" + in.name() + "' has no tensor type");
    }
    g->inputs.push_back(id);
  }
  // Nodes: each output is produced once.
  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const auto& np = gp.node(ni);
    if (++im->total_nodes > im->limits.max_nodes) {
      return im->Error("more than " + std::to_string(im->limits.max_nodes) + " nodes");
    }
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    for (const std::string* text : {&np.name(), &np.op_type(), &np.domain()}) {
      Status name_ok =
          im->CheckName(*text, "node #" + std::to_string(ni) + ": name, op_type or domain");
      if (!name_ok.ok()) return name_ok;
    }
    for (const auto& a : np.attribute()) {
      Status name_ok = im->CheckName(a.name(), "node #" + std::to_string(ni) + ": attribute");
      if (!name_ok.ok()) return name_ok;
    }
    for (const auto* list : {&np.input(), &np.output()}) {
      for (const std::string& tn : *list) {
        Status name_ok = im->CheckName(tn, "node #" + std::to_string(ni) + ": tensor");
        if (!name_ok.ok()) return name_ok;
      }
    }
    ReadModules(np, &n, &g->eval_mode_hint);
    const std::string where = "node '" + n.Label(ni) + "'";
    if (n.op_type.empty()) return im->Error(where + ": empty op_type");
    for (const auto& a : np.attribute()) {
      Attribute attr;
      Status s = ReadAttribute(im, a, where, depth, &attr, &n);
      if (!s.ok()) return s;
      n.attrs[a.name()] = std::move(attr);
    }
    for (const auto& in : np.input()) {
      n.inputs.push_back(in.empty() ? -1 : g->FindOrAdd(in));
    }
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(-1);
        continue;
      }
      int id = g->FindOrAdd(out);
      Tensor& t = g->tensors[id];
      if (t.kind != TensorKind::kActivation) {
        return im->Error(where + ": output '" + out + "' is also a graph input or initializer");
      }
      if (t.producer == static_cast<int>(g->nodes.size())) {  // This very node.
        return im->Error(where + ": output '" + out + "' is listed twice");
      }
      if (t.producer >= 0) {
        return im->Error(where + ": output '" + out + "' is already produced by node '" +
                         g->nodes[t.producer].Label(t.producer) + "'");
      }
      t.producer = static_cast<int>(g->nodes.size());
      n.outputs.push_back(id);
    }
    g->nodes.push_back(std::move(n));
  }
  for (const auto& vi : gp.value_info()) {
    Status name_ok = im->CheckName(vi.name(), "value_info");
    if (!name_ok.ok()) return name_ok;
    int id = g->Find(vi.name());
    if (id < 0) continue;  // Describes nothing in this graph.
    Status s = ReadType(*im, vi.type(), vi.name(), &g->tensors[id]);
    if (!s.ok()) return s;
  }
  for (const auto& out : gp.output()) {
    Status name_ok = im->CheckName(out.name(), "graph output");
    if (!name_ok.ok()) return name_ok;
    int id = g->Find(out.name());
    if (id < 0) {
      return im->Error("graph output '" + out.name() + "' is produced by no node");
    }
    Status s = ReadType(*im, out.type(), out.name(), &g->tensors[id]);
    if (!s.ok()) return s;
    g->outputs.push_back(id);
  }
  g->Link();
  return Status();
}

void SilentLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

// protobuf parses at most INT_MAX bytes (its sizes are int): the 2 GiB
// default limit is one byte over that.
int64_t FileLimit(const ImportLimits& limits) {
  return std::min<int64_t>(limits.max_file_bytes, std::numeric_limits<int>::max());
}

}  // namespace

Result<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& source,
                              const ImportLimits& limits) {
  Importer im{source, limits, 0};
  if (static_cast<int64_t>(bytes.size()) > FileLimit(limits)) {
    return im.Error("file is larger than " + std::to_string(FileLimit(limits)) + " bytes");
  }
  if (bytes.empty()) return im.Error("empty file: not an ONNX model");
  google::protobuf::SetLogHandler(&SilentLog);
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream cis(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             static_cast<int>(bytes.size()));
  cis.SetRecursionLimit(100);
  if (!model.ParseFromCodedStream(&cis) || !cis.ConsumedEntireMessage()) {
    return im.Error("not a valid ONNX model (protobuf parse failed: truncated or not ONNX)");
  }
  if (!model.has_graph()) return im.Error("not an ONNX model: no graph");
  if (model.ir_version() < 3) {
    return im.Error("IR version " + std::to_string(model.ir_version()) +
                    " is not supported (3 or later)");
  }
  Graph g;
  g.source = source;
  g.ir_version = model.ir_version();
  g.producer_name = model.producer_name();
  g.producer_version = model.producer_version();
  for (const auto& op : model.opset_import()) {
    const std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    g.opsets[d] = op.version();
  }
  if (!g.opsets.count("")) return im.Error("no default-domain (ai.onnx) opset import");
  const int64_t opset = g.opsets[""];
  if (opset < 7 || opset > 23) {
    return im.Error("opset " + std::to_string(opset) + " is not supported (7 to 23)");
  }
  Status s = ImportGraph(&im, model.graph(), 0, &g);
  if (!s.ok()) return s;
  if (g.nodes.empty()) return im.Error("the graph has no nodes");
  if (g.outputs.empty()) return im.Error("the graph has no outputs");
  // Cycles and inputs that nothing produces are errors of the file itself,
  // reported here so that every command (not only those that infer shapes)
  // rejects them. Subgraphs may read outer-scope names, so only the top.
  auto order = TopologicalOrder(g);
  if (!order.ok()) return order.status();
  return g;
}

Result<Graph> ImportOnnxFile(const std::string& path, const ImportLimits& limits) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return Status::Error(path + ": cannot open file");
  const std::streamoff size = f.tellg();
  if (size < 0) return Status::Error(path + ": cannot read file");
  if (size > FileLimit(limits)) {
    return Status::Error(path + ": file is larger than " + std::to_string(FileLimit(limits)) +
                         " bytes");
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(bytes.data(), size)) return Status::Error(path + ": cannot read file");
  return ImportOnnxBytes(bytes, path, limits);
}

}  // namespace memplan
