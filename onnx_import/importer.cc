#include "onnx_import/importer.h"

#include <fcntl.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "onnx/onnx_pb.h"
#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/shape_inference.h"
#include "planner/text.h"

namespace memplan {
namespace {

// Shared state of one import: the file name for messages and the limits.
struct Importer {
  std::string source;
  ImportLimits limits;
  int64_t total_nodes = 0;
  int64_t module_path_bytes = 0;
  int64_t ir_version = 0;
  std::set<std::string> functions;  ///< "domain\nname" of the model-local functions.
  std::string last_fx_node;         ///< The FX node the previous ONNX node came from.
  int fx_calls = 0;                 ///< FX nodes seen so far (a new one per last_fx_node change).

  Status Error(const std::string& what) const { return Status::Error(source + ": " + what); }

  /// Names end up in messages, reports and generated code: valid UTF-8
  /// with no control characters (a newline or an escape sequence in a name
  /// could forge lines in a CI log), and at most max_name_bytes long.
  /// True when CheckName passes `name` (no message is built).
  bool NameFine(const std::string& name) const {
    return static_cast<int64_t>(name.size()) <= limits.max_name_bytes && ValidUtf8(name) &&
           !HasControlChar(name);
  }
  Status CheckName(const std::string& name, const std::string& what) const {
    if (static_cast<int64_t>(name.size()) > limits.max_name_bytes) {
      return Error(what + " '" + Clip(name, 60) + "' is longer than " +
                   std::to_string(limits.max_name_bytes) + " bytes");
    }
    if (!ValidUtf8(name)) return Error(what + " '" + Clip(name, 200) + "' is not valid UTF-8");
    if (HasControlChar(name)) {
      return Error(what + " '" + Clip(name, 200) + "' contains a control character");
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

/// The FX node text read for its name and target ("%native_dropout : [num_users=1] =
/// call_function[target=torch.ops.aten.native_dropout.default](args = ...").
constexpr size_t kFxHead = 400;
/// Longest ATen op or module class name kept (longer ones are clipped).
constexpr size_t kMaxRecordedName = 200;

/// The last quoted entry but one of a class_hierarchy list (the last is the
/// op): "['torchvision.models.resnet.ResNet', 'torch.nn.modules.conv.Conv2d',
/// 'aten.conv2d.default']" -> "torch.nn.modules.conv.Conv2d"; "" when the op
/// runs in the root module alone.
std::string InnermostModuleClass(const std::string& v) {
  std::string prev, last;
  int entries = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '\'' && v[i] != '"') continue;
    const size_t j = v.find(v[i], i + 1);
    if (j == std::string::npos) break;
    prev = std::move(last);
    last = v.substr(i + 1, std::min(j - i - 1, kMaxRecordedName));
    ++entries;
    i = j;
  }
  return entries >= 3 ? prev : std::string();
}

/// Counts the PyTorch op of `fx_text` (an FX node's text) in *record, once
/// per FX node: the ONNX nodes one op became follow each other and share it.
void RecordFxNode(Importer* im, const std::string& fx_text, const std::string& module_class,
                  ExporterRecord* record) {
  const size_t colon = fx_text.find(" :");
  const std::string fx_name = fx_text.substr(0, colon);
  if (fx_name == im->last_fx_node) return;
  im->last_fx_node = fx_name;
  ++im->fx_calls;
  ++record->fx_nodes;
  static const std::string kTarget = "target=";
  const size_t t = fx_text.find(kTarget);
  if (t != std::string::npos) {
    size_t begin = t + kTarget.size();
    const size_t end = fx_text.find_first_of("]( ", begin);
    std::string target = fx_text.substr(begin, end == std::string::npos ? end : end - begin);
    if (target.rfind("torch.ops.", 0) == 0) target.erase(0, 10);
    if (target.size() > kMaxRecordedName) target.resize(kMaxRecordedName);
    ++record->aten_ops[target];
  }
  if (!module_class.empty()) ++record->module_classes[module_class];
}

// The modules a node runs inside, outermost first, and its module path: the
// dynamo exporter's name scopes (['', 'm', 'm.transformer', ...,
// 'm.transformer.h.0.attn', 'addmm']), or a TorchScript-style name
// ("/layer1/layer1.0/conv1/Conv" -> layer1, layer1.0, layer1.0.conv1). Counts
// in *record the PyTorch op the node was made from and its innermost
// module's class (RecordFxNode). Adds to *buffer_args the module buffers the node
// reads: torch.export names a buffer's placeholder `b_<fqn>` and a
// parameter's `p_<fqn>` (dots as underscores); the dynamo exporter keeps the
// FX node text ("pkg.torch.onnx.fx_node").
// Module paths repeat their parents' prefixes, so their size grows with the
// square of the depth: the depth and the bytes of all paths are bounded.
Status ReadModules(Importer* im, const onnx::NodeProto& np, const std::string& where, Node* n,
                   ExporterRecord* record, std::set<std::string>* buffer_args,
                   std::string* stack_trace) {
  // NodeProto.metadata_props (field 9, IR 10) is newer than Debian's schema:
  // read it from the unknown fields, parsing only the entries we use.
  static const std::string kScopes = "pkg.torch.onnx.name_scopes";
  const auto& unknown = np.GetReflection()->GetUnknownFields(np);
  bool found = false;
  std::string fx_text;       // The head of the FX node's text (name and target).
  std::string module_class;  // The innermost module's class.
  for (int f = 0; f < unknown.field_count(); ++f) {
    const auto& field = unknown.field(f);
    if (field.number() != 9 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const std::string& raw = field.length_delimited();
    if (raw.find("pkg.torch.onnx.class_hierarchy") != std::string::npos) {
      onnx::StringStringEntryProto ch;
      if (ch.ParseFromString(raw) && ch.key() == "pkg.torch.onnx.class_hierarchy") {
        module_class = InnermostModuleClass(ch.value());
      }
    }
    if (raw.find("pkg.torch.onnx.stack_trace") != std::string::npos) {
      onnx::StringStringEntryProto st;
      if (st.ParseFromString(raw) && st.key() == "pkg.torch.onnx.stack_trace") {
        *stack_trace = st.value();
      }
    }
    if (raw.find("pkg.torch.onnx.fx_node") != std::string::npos) {
      onnx::StringStringEntryProto fx;
      if (fx.ParseFromString(raw) && fx.key() == "pkg.torch.onnx.fx_node") {
        const std::string& v = fx.value();
        fx_text = v.substr(0, std::min<size_t>(v.size(), kFxHead));
        for (size_t at = v.find("%b_"); at != std::string::npos; at = v.find("%b_", at + 1)) {
          size_t end = at + 3;
          while (end < v.size() &&
                 (std::isalnum(static_cast<unsigned char>(v[end])) || v[end] == '_'))
            ++end;
          buffer_args->insert(v.substr(at + 3, end - at - 3));
        }
      }
    }
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
      if (m.empty() || m.rfind("_empty_nn_module_stack", 0) == 0) continue;
      // Module names reach the terminal, reports and advise's snippet as
      // node names do: the same rules.
      if (!im->NameFine(m)) return im->CheckName(m, where + ": module name");
      n->modules.push_back(std::move(m));
    }
    found = true;
  }
  if (!fx_text.empty()) {
    RecordFxNode(im, fx_text, module_class, record);
    static const std::string kUnbind = "target=torch.ops.aten.unbind.int]";
    if (fx_text.find(kUnbind) != std::string::npos) n->unbind_call = im->fx_calls;
    // softmax(x, dim, dtype): a dtype among its arguments (the others are
    // %values and ints).
    static const std::string kSoftmax = "target=torch.ops.aten.softmax.int](";
    const size_t at = fx_text.find(kSoftmax);
    if (at != std::string::npos &&
        fx_text.find("torch.", at + kSoftmax.size()) != std::string::npos) {
      n->softmax_dtype_call = im->fx_calls;
    }
  }
  n->modules_known = found;
  n->runs_out_of_place = ModuleRunsOutOfPlace(module_class);
  n->autocast_disabled = ModuleDisablesAutocast(module_class);
  auto too_deep = [&]() {
    return im->Error(where + ": module path nested deeper than " +
                     std::to_string(im->limits.max_module_depth) + " levels");
  };
  if (static_cast<int>(n->modules.size()) > im->limits.max_module_depth) return too_deep();
  if (!found) {
    const std::string& name = np.name();
    if (name.size() < 2 || name[0] != '/') return Status();
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
        if (!out.empty() && part.size() > out.size() && part[out.size()] == '.' &&
            part.compare(0, out.size(), out) == 0) {
          out = part;
        } else {
          out = out.empty() ? part : out + "." + part;
        }
        if (static_cast<int>(n->modules.size()) >= im->limits.max_module_depth) return too_deep();
        n->modules.push_back(out);
      }
      start = slash + 1;
    }
  }
  for (const std::string& m : n->modules) im->module_path_bytes += static_cast<int64_t>(m.size());
  if (im->module_path_bytes > im->limits.max_module_path_bytes) {
    return im->Error(where + ": the module paths of the nodes take more than " +
                     std::to_string(im->limits.max_module_path_bytes >> 20) + " MiB");
  }
  if (!n->modules.empty()) n->scope = n->modules.back();
  return Status();
}

const char* AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kFloat:
      return "FLOAT";
    case AttrType::kInt:
      return "INT";
    case AttrType::kString:
      return "STRING";
    case AttrType::kTensor:
      return "TENSOR";
    case AttrType::kGraph:
      return "GRAPH";
    case AttrType::kFloats:
      return "FLOATS";
    case AttrType::kInts:
      return "INTS";
    case AttrType::kStrings:
      return "STRINGS";
    case AttrType::kOther:
      break;
  }
  return "another type";
}

// The type the ONNX operator schemas give an attribute name, for the names
// that have one type in every default-domain operator that has them (the
// attributes the planner reads). An attribute of another type would be read
// as absent, so it is an error.
bool ExpectedAttrType(const std::string& name, AttrType* type) {
  static const std::map<std::string, AttrType> kTypes = {
      {"axes", AttrType::kInts},
      {"axis", AttrType::kInt},
      {"perm", AttrType::kInts},
      {"pads", AttrType::kInts},
      {"strides", AttrType::kInts},
      {"dilations", AttrType::kInts},
      {"kernel_shape", AttrType::kInts},
      {"output_padding", AttrType::kInts},
      {"output_shape", AttrType::kInts},
      {"split", AttrType::kInts},
      {"starts", AttrType::kInts},
      {"ends", AttrType::kInts},
      {"group", AttrType::kInt},
      {"keepdims", AttrType::kInt},
      {"noop_with_empty_axes", AttrType::kInt},
      {"transA", AttrType::kInt},
      {"transB", AttrType::kInt},
      {"to", AttrType::kInt},
      {"ceil_mode", AttrType::kInt},
      {"count_include_pad", AttrType::kInt},
      {"storage_order", AttrType::kInt},
      {"hidden_size", AttrType::kInt},
      {"batch_dims", AttrType::kInt},
      {"num_outputs", AttrType::kInt},
      {"allowzero", AttrType::kInt},
      {"num_scan_inputs", AttrType::kInt},
      {"epsilon", AttrType::kFloat},
      {"alpha", AttrType::kFloat},
      {"beta", AttrType::kFloat},
      {"equation", AttrType::kString},
      {"auto_pad", AttrType::kString},
      {"direction", AttrType::kString},
      {"then_branch", AttrType::kGraph},
      {"else_branch", AttrType::kGraph},
      {"body", AttrType::kGraph},
  };
  auto it = kTypes.find(name);
  if (it == kTypes.end()) return false;
  *type = it->second;
  return true;
}

Status ReadAttribute(Importer* im, const onnx::AttributeProto& a, const std::string& where,
                     int depth, Attribute* out, Node* node) {
  using AP = onnx::AttributeProto;
  // A reference to an attribute of the calling function: graphs hold none
  // (local functions are refused), so its value would be read as absent.
  if (!a.ref_attr_name().empty()) {
    return im->Error(where + ": attribute '" + PrintableText(Clip(a.name(), 60)) +
                     "' refers to a function attribute ('" +
                     PrintableText(Clip(a.ref_attr_name(), 60)) + "') outside any function");
  }
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
        node->subgraphs.push_back(std::move(sub));
      }
      break;
    }
    default:
      out->type = AttrType::kOther;
      break;
  }
  return Status();
}

// True when a graph input's declared type says it is not the initializer
// of the same name: a symbolic or unknown dim, another rank or other dims.
bool OverridesInitializer(const onnx::TypeProto& type, const Tensor& init) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return false;
  const auto& dims = type.tensor_type().shape().dim();
  if (static_cast<size_t>(dims.size()) != init.declared.size()) return true;
  for (int k = 0; k < dims.size(); ++k) {
    if (!dims[k].has_dim_value() || dims[k].dim_value() != init.declared[k].value) return true;
  }
  return false;
}

/// Graph::frames and Graph::stacks as they are built: each once.
struct InternedFrames {
  std::map<std::tuple<std::string, int, std::string>, int> frames;
  std::map<std::vector<int>, int> stacks;
};

/// Node::stack for `frames`, the node's stack trace: -1 unless they are
/// the root module's forward and one frame per module of n.modules (the
/// dynamo exporter records one per module call; a graph module it runs
/// inside a module, rotary embeddings under autocast, shows its own).
int InternStack(std::vector<SourceFrame> frames, const Node& n, InternedFrames* in, Graph* g) {
  if (frames.empty() || frames.size() != n.modules.size() + 1) return -1;
  std::vector<int> ids;
  ids.reserve(frames.size());
  for (SourceFrame& f : frames) {
    auto key = std::make_tuple(f.file, f.line, f.function);
    auto it = in->frames.find(key);
    if (it == in->frames.end()) {
      it = in->frames.emplace(std::move(key), static_cast<int>(g->frames.size())).first;
      g->frames.push_back(std::move(f));
    }
    ids.push_back(it->second);
  }
  auto it = in->stacks.find(ids);
  if (it == in->stacks.end()) {
    it = in->stacks.emplace(ids, static_cast<int>(g->stacks.size())).first;
    g->stacks.push_back(std::move(ids));
  }
  return it->second;
}

Status ImportGraph(Importer* im, const onnx::GraphProto& gp, int depth, Graph* g) {
  g->name = gp.name();
  // Every node, initializer and input adds a tensor or two: reserving them
  // keeps a large graph's vectors from growing (and holding twice) as it
  // is read.
  g->nodes.reserve(g->nodes.size() + gp.node_size());
  g->tensors.reserve(g->tensors.size() + gp.initializer_size() + gp.input_size() + gp.node_size());
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
    if (info.external) g->external_locations[id] = std::move(info.location);
    g->initializers.push_back(id);
  }
  for (const auto& sp : gp.sparse_initializer()) {
    return im->Error("sparse initializer '" + sp.values().name() + "' is not supported");
  }
  std::set<int> shadowed;  // Initializers that graph inputs override.
  for (const auto& in : gp.input()) {
    if (in.name().empty()) return im->Error("a graph input has no name");
    Status name_ok = im->CheckName(in.name(), "graph input");
    if (!name_ok.ok()) return name_ok;
    int existing = g->Find(in.name());
    if (existing >= 0 && g->tensors[existing].kind == TensorKind::kInitializer) {
      // IR < 4 lists initializers as inputs too. From IR 4 on, an input
      // with an initializer of its name is an input whose initializer is
      // only a default: one whose declared shape is symbolic or differs
      // from the initializer's stays an input (bound by --batch and --dim).
      if (im->ir_version < 4 || !OverridesInitializer(in.type(), g->tensors[existing])) continue;
      if (!shadowed.insert(existing).second) {
        return im->Error("graph input '" + in.name() + "' is listed twice");
      }
      Tensor& t = g->tensors[existing];
      t.kind = TensorKind::kGraphInput;
      t.has_declared = false;
      t.declared.clear();
      t.has_values = false;
      t.values.clear();
      t.external = false;
      g->external_locations.erase(existing);
      Status s = ReadType(*im, in.type(), in.name(), &t);
      if (!s.ok()) return s;
      g->inputs.push_back(existing);
      continue;
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
  if (!shadowed.empty()) {
    std::vector<int> kept;
    for (int id : g->initializers) {
      if (!shadowed.count(id)) kept.push_back(id);
    }
    g->initializers = std::move(kept);
  }
  // Nodes: each output is produced once.
  std::set<std::string> buffer_args;  // placeholder names of module buffers
  InternedFrames interned;
  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const auto& np = gp.node(ni);
    if (++im->total_nodes > im->limits.max_nodes) {
      return im->Error("more than " + std::to_string(im->limits.max_nodes) +
                       " nodes (the node limit; --max-nodes N raises it)");
    }
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    // The message (and its text) is only built for a name that fails.
    auto check = [&](const std::string& text, const char* what) {
      return im->NameFine(text) ? Status()
                                : im->CheckName(text, "node #" + std::to_string(ni) + ": " + what);
    };
    for (const std::string* text : {&np.name(), &np.op_type(), &np.domain()}) {
      Status name_ok = check(*text, "name, op_type or domain");
      if (!name_ok.ok()) return name_ok;
    }
    for (const auto& a : np.attribute()) {
      Status name_ok = check(a.name(), "attribute");
      if (!name_ok.ok()) return name_ok;
    }
    for (const auto* list : {&np.input(), &np.output()}) {
      for (const std::string& tn : *list) {
        Status name_ok = check(tn, "tensor");
        if (!name_ok.ok()) return name_ok;
      }
    }
    const std::string where = "node '" + n.Label(ni) + "'";
    std::string stack_trace;
    Status modules_ok = ReadModules(im, np, where, &n, &g->exporter, &buffer_args, &stack_trace);
    if (!modules_ok.ok()) return modules_ok;
    if (!stack_trace.empty()) {
      std::vector<SourceFrame> frames = ParseStackTrace(stack_trace);
      if (frames.size() == 1 && frames[0].file.rfind("<eval_with_key>", 0) == 0) {
        n.fx_region = frames[0].file;
      }
      n.stack = InternStack(std::move(frames), n, &interned, g);
    }
    if (n.op_type.empty()) return im->Error(where + ": empty op_type");
    if (!im->functions.empty() && im->functions.count(n.domain + '\n' + n.op_type)) {
      return im->Error(where + ": calls the model-local function '" +
                       (n.domain.empty() ? "" : n.domain + ".") + n.op_type +
                       "'; memplan does not expand local functions (export with them inlined)");
    }
    for (const auto& a : np.attribute()) {
      Attribute attr;
      Status s = ReadAttribute(im, a, where, depth, &attr, &n);
      if (!s.ok()) return s;
      AttrType expected;
      if (n.domain.empty() && ExpectedAttrType(a.name(), &expected) && attr.type != expected) {
        return im->Error(where + ": attribute '" + a.name() + "' is " + AttrTypeName(attr.type) +
                         ", expected " + AttrTypeName(expected));
      }
      if (n.attrs.count(a.name())) {
        return im->Error(where + ": attribute '" + a.name() + "' is given twice");
      }
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
  for (int id : g->initializers) {
    std::string placeholder = g->tensors[id].name;
    for (char& c : placeholder) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    if (buffer_args.count(placeholder)) g->tensors[id].exported_buffer = true;
  }
  g->Link();
  return Status();
}

// A subgraph may read names of the graphs around it; each name that it
// reads and does not define itself must be defined by one of them.
// `scopes` holds the enclosing graphs, innermost last.
Status CheckOuterNames(const Importer& im, const Graph& g, std::vector<const Graph*>* scopes) {
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    for (const auto& sub : g.nodes[ni].subgraphs) {
      scopes->push_back(&g);
      for (size_t mi = 0; mi < sub->nodes.size(); ++mi) {
        const Node& m = sub->nodes[mi];
        for (int t : m.inputs) {
          if (t < 0) continue;
          const Tensor& tensor = sub->tensors[t];
          if (tensor.kind != TensorKind::kActivation || tensor.producer >= 0) continue;
          bool defined = false;
          for (size_t k = scopes->size(); k-- > 0 && !defined;) {
            const Graph* outer = (*scopes)[k];
            const int id = outer->Find(tensor.name);
            if (id < 0) continue;
            const Tensor& o = outer->tensors[id];
            defined = o.kind != TensorKind::kActivation || o.producer >= 0;
          }
          if (!defined) {
            return im.Error("node '" + m.Label(static_cast<int>(mi)) +
                            "' (in a subgraph of node '" + g.nodes[ni].Label(static_cast<int>(ni)) +
                            "'): input '" + tensor.name +
                            "' is not produced by any node, graph input or initializer of its "
                            "graph or the graphs around it");
          }
        }
      }
      Status s = CheckOuterNames(im, *sub, scopes);
      scopes->pop_back();
      if (!s.ok()) return s;
    }
  }
  return Status();
}

void SilentLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

// protobuf parses at most INT_MAX bytes (its sizes are int): the 2 GiB
// default limit is one byte over that.
int64_t FileLimit(const ImportLimits& limits) {
  return std::min<int64_t>(limits.max_file_bytes, std::numeric_limits<int>::max());
}

// Parses a ModelProto from `input` and turns it into a Graph.
Result<Graph> ImportFromStream(google::protobuf::io::ZeroCopyInputStream* input,
                               const std::string& source, const ImportLimits& limits,
                               bool gzip = false);

// Whether bytes start with gzip's magic number (1f 8b).
bool IsGzip(const void* data, size_t size);

// ImportFromStream of gzip-compressed bytes.
Result<Graph> ImportFromGzip(google::protobuf::io::ZeroCopyInputStream* compressed,
                             const std::string& source, const ImportLimits& limits);

}  // namespace

namespace {

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  static const std::set<std::string> kKeywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return kKeywords.count(s) == 0;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The names of an assignment's target list ("a, (b, c)" -> "a", ""): a
// nested, starred, attribute or subscript target is no plain name ("").
std::vector<std::string> TargetNames(std::string t) {
  t = Trim(t);
  if (t.size() >= 2 &&
      ((t.front() == '(' && t.back() == ')') || (t.front() == '[' && t.back() == ']'))) {
    t = t.substr(1, t.size() - 2);
  }
  std::vector<std::string> names;
  int depth = 0;
  std::string cur;
  for (char c : t) {
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      names.push_back(Trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!Trim(cur).empty() || names.empty()) names.push_back(Trim(cur));  // "a," is one target
  for (std::string& n : names) {
    if (!IsIdentifier(n)) n.clear();
  }
  return names;
}

bool StartsWithWord(const std::string& text, const char* w) {
  const size_t n = std::strlen(w);
  return text.compare(0, n, w) == 0 &&
         (text.size() == n ||
          !(std::isalnum(static_cast<unsigned char>(text[n])) || text[n] == '_'));
}

// The names `cat(NAME`, `concat(NAME`, `stack(NAME` (a subscript may
// follow: `NAME[::-1]`) pass as their first argument in `text`: containers
// a local name holds, not a list built on the line (`cat([a, b])`).
std::vector<std::string> JoinedContainers(const std::string& text) {
  std::vector<std::string> names;
  for (const char* fn : {"cat", "concat", "concatenate", "stack", "hstack", "vstack"}) {
    const std::string call = std::string(fn) + "(";
    for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
      if (at > 0 &&
          (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) {
        continue;  // `concat(` inside `my_concat(`
      }
      size_t i = at + call.size();
      while (i < text.size() && text[i] == ' ') ++i;
      const size_t begin = i;
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
        ++i;
      }
      std::string name = text.substr(begin, i - begin);
      if (!IsIdentifier(name)) continue;
      if (i < text.size() && text[i] == '[') {  // a subscript of the container
        int depth = 0;
        for (; i < text.size(); ++i) {
          if (text[i] == '[') ++depth;
          if (text[i] == ']' && --depth == 0) break;
        }
        if (i == text.size()) continue;
        ++i;
      }
      while (i < text.size() && text[i] == ' ') ++i;
      if (i >= text.size() || (text[i] != ',' && text[i] != ')')) continue;  // `cat(x.view(...))`
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

// Whether `text` (one statement) converts a value to float32 and reads the
// result within the line: `.float()`, `.to(torch.float32)`, `.to(torch.float)`
// or `.to(dtype=torch.float32)` with more of the expression after it. A call
// that ends the line (`x = x.float()`) rebinds a name: later lines read it.
bool UpcastsInline(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c != ' ') s += c;
  }
  static const char* const kCalls[] = {".float()", ".to(torch.float32)", ".to(torch.float)",
                                       ".to(dtype=torch.float32)", ".to(dtype=torch.float)"};
  for (const char* call : kCalls) {
    // The first occurrence decides: one that ends the line is the only one.
    const size_t at = s.find(call);
    if (at != std::string::npos && at + std::strlen(call) < s.size()) return true;
  }
  return false;
}

}  // namespace

PyStatement ParsePyStatement(const std::string& raw) {
  PyStatement st;  // kUnknown
  // The line without its comment, and the top-level assignment '=' signs
  // in it, outside strings.
  std::string line;
  std::vector<size_t> eqs;
  size_t augmented_op = std::string::npos;  // where `+=`'s operator starts
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (quote != 0) {
      line += c;
      if (c == '\\' && i + 1 < raw.size()) {
        line += raw[++i];
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (c == '#') break;
    if (c == '\'' || c == '"') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && --depth < 0) {
      return st;  // closes a bracket an earlier line opened
    }
    if (c == '=' && depth == 0) {
      const char prev = line.empty() ? ' ' : line.back();
      const char next = i + 1 < raw.size() ? raw[i + 1] : ' ';
      const bool shift_op = (prev == '<' || prev == '>') && line.size() >= 2 &&
                            line[line.size() - 2] == prev;  // `<<=`, `>>=`
      if (next == '=') {                                    // `==`
        line += c;
        line += raw[++i];
        continue;
      }
      if (prev == '=' || prev == '!' || prev == ':' ||
          ((prev == '<' || prev == '>') && !shift_op)) {
        line += c;  // `!=`, `:=`, `<=`, `>=`
        continue;
      }
      // An assignment's '=' (or its operator, in `a += b`) follows a space:
      // `key=value` is a keyword argument of a call an earlier line opened.
      size_t op = line.size();
      while (op > 0 && line[op - 1] != '\0' &&
             std::strchr("+-*/%@&|^<>", line[op - 1]) != nullptr) {
        --op;
      }
      if (op == 0 || line[op - 1] != ' ') return st;
      if (op != line.size()) {
        if (!eqs.empty()) return st;
        augmented_op = op;
      } else if (augmented_op != std::string::npos) {
        return st;
      }
      eqs.push_back(line.size());
    }
    line += c;
  }
  const std::string text = Trim(line);
  if (text.empty() || quote != 0) return st;
  // A continuation line: a trailing comma or backslash, a leading operator
  // or closing bracket.
  const char last = text.back();
  if (last == ',' || last == '\\') return st;
  if (text.front() == '\0' || std::strchr(".,+-*/%@&|^<>=~:", text.front()) != nullptr) return st;
  st.joined = JoinedContainers(text);
  st.upcasts_inline = UpcastsInline(text);
  for (const char* word : {"and", "or", "else", "in", "is", "not", "if", "for"}) {
    // `if ...:` and `for ...:` headers bind nothing followed here (a loop
    // variable is not); `and x`, `else y`, `for x in y)` continue a line.
    if (StartsWithWord(text, word)) {
      if (last == ':') st.kind = PyStatement::Kind::kOther;
      return st;
    }
  }
  if (StartsWithWord(text, "return")) {
    st.kind = PyStatement::Kind::kReturn;
    return st;
  }
  for (const char* word : {"elif",    "while",  "with", "assert", "raise",  "del",     "yield",
                           "await",   "lambda", "pass", "import", "from",   "try",     "except",
                           "finally", "async",  "def",  "class",  "global", "nonlocal"}) {
    if (StartsWithWord(text, word)) {
      st.kind = PyStatement::Kind::kOther;
      return st;
    }
  }
  st.kind = PyStatement::Kind::kOther;  // an expression statement, or `a: T`
  if (eqs.empty()) return st;
  size_t begin = 0;
  for (size_t k = 0; k < eqs.size(); ++k) {
    const size_t end = (k == 0 && augmented_op != std::string::npos) ? augmented_op : eqs[k];
    std::string target = line.substr(begin, end - begin);
    if (k == 0) {  // `a: T = v`: the annotation is no target
      int d = 0;
      for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == '(' || target[i] == '[' || target[i] == '{') ++d;
        if (target[i] == ')' || target[i] == ']' || target[i] == '}') --d;
        if (target[i] == ':' && d == 0) {
          target.resize(i);
          break;
        }
      }
    }
    if (Trim(target).empty()) return PyStatement();
    st.targets.push_back(TargetNames(target));
    begin = eqs[k] + 1;
  }
  st.kind = PyStatement::Kind::kAssign;
  return st;
}

std::vector<SourceFrame> ParseStackTrace(const std::string& trace) {
  // Per frame: `File "PATH", line N, in FUNCTION`, then its source line.
  static const std::string kFile = "File \"";
  static const std::string kLine = ", line ";
  static const std::string kIn = ", in ";
  std::vector<SourceFrame> frames;
  size_t at = trace.find(kFile);
  while (at != std::string::npos) {
    SourceFrame f;
    const size_t path_begin = at + kFile.size();
    const size_t path_end = trace.find('"', path_begin);
    if (path_end == std::string::npos) break;
    f.file = trace.substr(path_begin, path_end - path_begin);
    size_t p = path_end + 1;
    if (trace.compare(p, kLine.size(), kLine) != 0) break;
    p += kLine.size();
    int64_t line = 0;
    while (p < trace.size() && std::isdigit(static_cast<unsigned char>(trace[p])) &&
           line < (int64_t{1} << 30)) {
      line = line * 10 + (trace[p++] - '0');
    }
    f.line = static_cast<int>(line);
    if (trace.compare(p, kIn.size(), kIn) != 0) break;
    p += kIn.size();
    const size_t eol = trace.find('\n', p);
    f.function = trace.substr(p, eol == std::string::npos ? std::string::npos : eol - p);
    size_t next = std::string::npos;
    if (eol != std::string::npos) {
      next = trace.find(kFile, eol);
      const size_t src_end = trace.find('\n', eol + 1);
      const std::string src = trace.substr(
          eol + 1, src_end == std::string::npos ? std::string::npos : src_end - eol - 1);
      // No source line when the next frame follows at once.
      if (src.find(kFile) == std::string::npos) f.statement = ParsePyStatement(src);
    }
    frames.push_back(std::move(f));
    at = next;
  }
  return frames;
}

Result<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& source,
                              const ImportLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > FileLimit(limits)) {
    return Status::Error(source + ": file is larger than " + std::to_string(FileLimit(limits)) +
                         " bytes");
  }
  if (bytes.empty()) return Status::Error(source + ": empty file: not an ONNX model");
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  if (IsGzip(bytes.data(), bytes.size())) return ImportFromGzip(&input, source, limits);
  return ImportFromStream(&input, source, limits);
}

Result<Graph> ImportOnnxFile(const std::string& path, const ImportLimits& limits) {
  // Non-blocking open and fstat before any read: a FIFO or a device is
  // refused instead of blocking, a directory is named as one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": cannot open file");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::Error(path + ": cannot read file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return Status::Error(path + ": is " + std::string(kind) + ", not a regular file");
  }
  if (st.st_size > FileLimit(limits)) {
    ::close(fd);
    return Status::Error(path + ": file is larger than " + std::to_string(FileLimit(limits)) +
                         " bytes");
  }
  if (st.st_size == 0) {
    ::close(fd);
    return Status::Error(path + ": empty file: not an ONNX model");
  }
  // Parsed from the file as it is read: the bytes are never held twice.
  unsigned char magic[2] = {0, 0};
  const bool gzip = ::pread(fd, magic, sizeof magic, 0) == sizeof magic && IsGzip(magic, 2);
  Result<Graph> g = [&]() {
    google::protobuf::io::FileInputStream input(fd);
    if (gzip) return ImportFromGzip(&input, path, limits);
    return ImportFromStream(&input, path, limits);
  }();
  ::close(fd);
  return g;
}

namespace {

bool IsGzip(const void* data, size_t size) {
  const auto* b = static_cast<const unsigned char*>(data);
  return size >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

// A gzip-compressed model (`model.onnx.gz`): parsed as it is inflated. The
// size limit bounds the inflated bytes too (CodedInputStream's total limit),
// so a small file cannot expand without bound.
Result<Graph> ImportFromGzip(google::protobuf::io::ZeroCopyInputStream* compressed,
                             const std::string& source, const ImportLimits& limits) {
  google::protobuf::io::GzipInputStream input(compressed,
                                              google::protobuf::io::GzipInputStream::GZIP);
  Result<Graph> g = ImportFromStream(&input, source, limits, /*gzip=*/true);
  if (!g.ok() && input.ZlibErrorCode() < 0) {
    const char* zlib_message = input.ZlibErrorMessage();
    const std::string why = zlib_message != nullptr
                                ? std::string(zlib_message)
                                : "error " + std::to_string(input.ZlibErrorCode());
    return Status::Error(source + ": gzip data is truncated or corrupt (zlib: " + why + ")");
  }
  return g;
}

Result<Graph> ImportFromStream(google::protobuf::io::ZeroCopyInputStream* input,
                               const std::string& source, const ImportLimits& limits, bool gzip) {
  Importer im;
  im.source = source;
  im.limits = limits;
  google::protobuf::SetLogHandler(&SilentLog);
  // The parsed file lives on an arena: its million small strings and
  // messages are bump-allocated and go in one release, not one free each.
  google::protobuf::ArenaOptions arena_options;
  arena_options.start_block_size = 64 << 10;
  arena_options.max_block_size = 4 << 20;
  google::protobuf::Arena arena(arena_options);
  onnx::ModelProto& model = *google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
  {
    google::protobuf::io::CodedInputStream cis(input);
    cis.SetTotalBytesLimit(static_cast<int>(FileLimit(limits)));
    cis.SetRecursionLimit(100);
    if (!model.ParseFromCodedStream(&cis) || !cis.ConsumedEntireMessage()) {
      if (gzip && cis.CurrentPosition() >= FileLimit(limits)) {
        return im.Error("decompresses to more than " + std::to_string(FileLimit(limits)) +
                        " bytes");
      }
      return im.Error(
          gzip ? "not a valid ONNX model once decompressed (protobuf parse failed: "
                 "the gzip data is truncated or holds no ONNX model)"
               : "not a valid ONNX model (protobuf parse failed: truncated or not ONNX)");
    }
  }
  // Free text that is never used: dropped before the graph is built.
  model.clear_doc_string();
  if (model.has_graph()) {
    model.mutable_graph()->clear_doc_string();
    for (auto& n : *model.mutable_graph()->mutable_node()) n.clear_doc_string();
  }
  if (!model.has_graph()) return im.Error("not an ONNX model: no graph");
  if (model.ir_version() < 3) {
    return im.Error("IR version " + std::to_string(model.ir_version()) +
                    " is not supported (3 or later)");
  }
  Graph g;
  g.source = source;
  g.ir_version = model.ir_version();
  im.ir_version = model.ir_version();
  // Free text that is only shown: kept printable and short.
  g.producer_name = Clip(PrintableText(model.producer_name()), 200);
  g.producer_version = Clip(PrintableText(model.producer_version()), 200);
  for (const auto& op : model.opset_import()) {
    const std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    if (g.opsets.count(d)) {
      return im.Error("opset_import lists the domain '" + Clip(d.empty() ? "ai.onnx" : d, 200) +
                      "' twice");
    }
    g.opsets[d] = op.version();
  }
  // Model-local functions are not expanded: a node that calls one is
  // refused (planning around its body would miss what it allocates).
  for (const auto& f : model.functions()) {
    im.functions.insert((f.domain() == "ai.onnx" ? "" : f.domain()) + '\n' + f.name());
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
  std::vector<const Graph*> scopes;
  s = CheckOuterNames(im, g, &scopes);
  if (!s.ok()) return s;
  return g;
}

}  // namespace

}  // namespace memplan
