// bitsandbytes-quantised weights in HF checkpoints (launch/io/bnb_weights.h).
#include "launch/io/bnb_weights.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/kernels/quantize.h"

namespace braid {

namespace {

constexpr const char* kStateNf4 = ".quant_state.bitsandbytes__nf4";
constexpr const char* kStatePrefix = ".quant_state.bitsandbytes__";
// Linear4bit's state tensors beside `weight`, as QuantState.as_dict(packed=True) names them.
constexpr const char* kStateTensors[] = {".absmax", ".quant_map", ".nested_absmax",
                                         ".nested_quant_map"};

struct QuantState {
  std::string where;  // "<file>: <tensor>" for messages
  int64_t block = 0, nested_block = 0;
  bool nested = false;
  float offset = 0;
  std::string dtype;
  Shape shape;
};

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  BRAID_USER_CHECK(j.contains(key), "{}: the quant state has no '{}'", where, key);
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    user_error("{}: the quant state's '{}' is {}, of the wrong type", where, key, j.at(key).dump());
  }
}

QuantState parse_state(const SafetensorsFile& f, const std::string& tensor) {
  QuantState s;
  s.where = f.path() + ": " + tensor;
  const Tensor bytes = f.get(tensor);
  BRAID_USER_CHECK(bytes.dtype() == DType::U8, "{} is {}, expected u8 (JSON bytes)", s.where,
                   dtype_name(bytes.dtype()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::string(static_cast<const char*>(bytes.raw()), bytes.nbytes()));
  } catch (const nlohmann::json::exception& e) {
    user_error("{}: the quant state is not JSON ({})", s.where, e.what());
  }
  BRAID_USER_CHECK(j.is_object(), "{}: the quant state is not a JSON object", s.where);
  const auto type = field<std::string>(j, "quant_type", s.where);
  BRAID_USER_CHECK(type == "nf4", "{}: quant_type '{}' is not supported; braid reads nf4", s.where,
                   type);
  s.block = field<int64_t>(j, "blocksize", s.where);
  BRAID_USER_CHECK(s.block > 0, "{}: blocksize {} must be positive", s.where, s.block);
  s.dtype = field<std::string>(j, "dtype", s.where);
  BRAID_USER_CHECK(s.dtype == "float32" || s.dtype == "bfloat16" || s.dtype == "float16",
                   "{}: dtype '{}' is not supported; expected float32, bfloat16 or float16",
                   s.where, s.dtype);
  s.shape = field<std::vector<int64_t>>(j, "shape", s.where);
  BRAID_USER_CHECK(s.shape.size() == 2 && s.shape[0] > 0 && s.shape[1] > 0,
                   "{}: shape {} is not a matrix", s.where, j.at("shape").dump());
  s.nested = j.contains("nested_blocksize");
  if (s.nested) {
    s.nested_block = field<int64_t>(j, "nested_blocksize", s.where);
    BRAID_USER_CHECK(s.nested_block > 0, "{}: nested_blocksize {} must be positive", s.where,
                     s.nested_block);
    s.offset = field<float>(j, "nested_offset", s.where);
    const auto nd = field<std::string>(j, "nested_dtype", s.where);
    BRAID_USER_CHECK(nd == "float32", "{}: nested_dtype '{}' is not supported; expected float32",
                     s.where, nd);
  }
  return s;
}

// Tensor `name` of the checkpoint with the dtype and element count a quant state needs.
Tensor state_tensor(HfWeights& w, const std::string& name, DType dt, int64_t numel,
                    const std::string& where) {
  const SafetensorsFile& f = w.file(w.file_of(name));
  const Tensor t = f.get(name);
  BRAID_USER_CHECK(t.dtype() == dt && t.numel() == numel,
                   "{}: {} is {} {}, expected {} values of {}", where, name, dtype_name(t.dtype()),
                   shape_str(t.shape()), numel, dtype_name(dt));
  return t;
}

// The table a quant state names must be braid's (bit for bit), or its codes mean other values.
void check_table(const Tensor& got, QuantCode code, const std::string& name,
                 const std::string& where) {
  const Tensor want = quant_code_table(code);
  const int64_t n = code == QuantCode::Nf4 ? 16 : 256;
  BRAID_USER_CHECK(got.numel() == n && std::memcmp(got.raw(), want.raw(), n * 4) == 0,
                   "{}: {} is not {} (a custom code table); braid reads bitsandbytes' own", where,
                   name, code == QuantCode::Nf4 ? "the NF4 table" : "the signed dynamic map");
}

}  // namespace

BnbTensorView bnb_tensor_view(HfWeights& w) {
  BnbTensorView v;
  std::map<std::string, Shape> all(w.tensors().begin(), w.tensors().end());
  for (const auto& [name, shape] : all) {
    if (name.ends_with(".weight.SCB") || name.ends_with(".weight_format"))
      user_error(
          "{}: {} is a bitsandbytes 8-bit (LLM.int8) weight; braid reads 4-bit nf4 "
          "checkpoints (load_in_4bit) or unquantised ones",
          w.source(), name);
    const size_t at = name.find(kStatePrefix);
    if (at == std::string::npos) continue;
    const std::string weight = name.substr(0, at);
    BRAID_USER_CHECK(name.ends_with(kStateNf4),
                     "{}: {}: quant_type '{}' is not supported; braid reads nf4", w.source(), name,
                     name.substr(at + std::strlen(kStatePrefix)));
    BRAID_USER_CHECK(all.count(weight), "{}: {} has no tensor {} to go with it", w.source(), name,
                     weight);
    const QuantState s = parse_state(w.file(w.file_of(name)), name);
    v.quantised.emplace(weight, s.shape);
  }
  for (const auto& [name, shape] : w.tensors()) {
    if (name.find(kStatePrefix) != std::string::npos) continue;
    bool state = false;
    for (const char* suffix : kStateTensors)
      if (name.ends_with(suffix) &&
          v.quantised.count(name.substr(0, name.size() - std::strlen(suffix))))
        state = true;
    if (state) continue;
    auto q = v.quantised.find(name);
    v.tensors.emplace_back(name, q == v.quantised.end() ? shape : q->second);
  }
  return v;
}

Tensor read_bnb_weight(ExecContext& ctx, HfWeights& w, const std::string& name) {
  const std::string state_name = name + kStateNf4;
  const QuantState s = parse_state(w.file(w.file_of(state_name)), state_name);
  const int64_t n = s.shape[0] * s.shape[1], blocks = quant_blocks(n, s.block);
  const Tensor codes = state_tensor(w, name, DType::U8, (n + 1) / 2, s.where);
  check_table(state_tensor(w, name + ".quant_map", DType::F32, 16, s.where), QuantCode::Nf4,
              name + ".quant_map", s.where);
  Tensor absmax = ctx.empty({blocks}, DType::F32, MemCategory::Workspace);
  if (s.nested) {
    const Tensor nested_codes = state_tensor(w, name + ".absmax", DType::U8, blocks, s.where);
    const Tensor nested_absmax = state_tensor(w, name + ".nested_absmax", DType::F32,
                                              quant_blocks(blocks, s.nested_block), s.where);
    check_table(state_tensor(w, name + ".nested_quant_map", DType::F32, 256, s.where),
                QuantCode::Dynamic, name + ".nested_quant_map", s.where);
    // As bitsandbytes: the dequantised values, then the offset added in f32.
    dequantize_blockwise(ctx, absmax, nested_codes, nested_absmax, QuantCode::Dynamic,
                         s.nested_block, 0, s.offset);
  } else {
    absmax.copy_from(state_tensor(w, name + ".absmax", DType::F32, blocks, s.where));
  }
  Tensor out = ctx.empty(s.shape, DType::F32, MemCategory::Weights);
  dequantize_blockwise(ctx, out, codes, absmax, QuantCode::Nf4, s.block);
  if (s.dtype != "float32") {  // dequantize_4bit returns the state's dtype
    const DType dt = s.dtype == "bfloat16" ? DType::BF16 : DType::F16;
    out = out.to(dt, MemCategory::Workspace).to(DType::F32, MemCategory::Weights);
  }
  return out;
}

}  // namespace braid
