// cuDNN fused flash attention (core/kernels/cuda/cudnn_attention.h) through the cuDNN frontend's
// graph API. The only file that includes the frontend: it brings its own JSON and logging, so it
// stays away from the rest of braid. libcudnn is opened with dlopen on first use (the frontend's
// dynamic-loading mode), so the binary starts, and falls back to braid's kernel, without it.
//
// Layout: braid's q (B, Tq, Hq, D) row-major is cuDNN's [B, H, T, D] tensor with strides
// [Tq*Hq*D, D, Hq*D, 1] (no copy); lse (B, Hq, Tq) f32 is the [B, H, T, 1] "Stats" tensor, the
// natural log-sum-exp of the scaled scores, as braid's kernels keep it. Causal masks are aligned
// bottom-right: query row i sits at key position Tk - Tq + i (attention.h).
#include <cudnn_frontend.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/kernels/cuda/cuda_state.h"
#include "core/kernels/cuda/cudnn_attention.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

// The frontend's dynamic-loading mode reads libcudnn's symbols from this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace braid::cuda {

namespace fe = cudnn_frontend;

namespace {

// libcudnn opened once per process; the reason it could not be, else "".
struct Library {
  std::string error;
  std::string version;
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      fe::cudnn_dlhandle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (fe::cudnn_dlhandle) break;
    }
    if (!fe::cudnn_dlhandle) {
      const char* e = dlerror();
      l.error = fmt::format("libcudnn.so.9 could not be opened ({})", e ? e : "not found");
      return l;
    }
    // The frontend also opens the shared CUDA runtime (braid links the static one) for device
    // queries and the backward's workspace clearing; without it every graph build throws. Ask
    // for it the way the frontend will, so the status says why instead of cuDNN silently
    // taking no case.
    const char* cudart = std::getenv("CUDNN_FRONTEND_CUDART_LIB_NAME");
    const bool named = cudart && cudart[0] != '\0';
    void* rt = nullptr;
    for (const char* name :
         {named ? cudart : "libcudart.so.13", named ? cudart : "libcudart.so.12"})
      if ((rt = dlopen(name, RTLD_NOW)) != nullptr) break;
    if (!rt) {
      const char* e = dlerror();
      l.error = fmt::format(
          "{} could not be opened ({}); the cuDNN frontend needs the shared CUDA runtime",
          named ? cudart : "libcudart.so.13", e ? e : "not found");
      return l;
    }
    // rt stays open: the frontend's own dlopen of the same name then finds it loaded.
    try {
      const size_t v = fe::detail::get_backend_version();
      l.version = fmt::format("cuDNN {}.{}.{} (frontend {}.{}.{})", v / 10000, v / 100 % 100,
                              v % 100, CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                              CUDNN_FRONTEND_PATCH_VERSION);
      if (v < 90000) l.error = fmt::format("{} is older than 9.0", l.version);
    } catch (const std::exception& e) {
      l.error = fmt::format("libcudnn loaded but unusable: {}", e.what());
    }
    return l;
  }();
  return lib;
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Key {
  bool backward;
  int64_t B, Tq, Tk, Hq, Hkv, D;
  DType dtype;
  bool deterministic;  // the backward's order (train.deterministic); false in forward keys
  auto tie() const { return std::tie(backward, B, Tq, Tk, Hq, Hkv, D, dtype, deterministic); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Graph {
  std::shared_ptr<fe::graph::Graph> graph;  // null: cuDNN does not take this case
  int64_t workspace = 0;
};

class Cache final : public CudnnCache {
 public:
  ~Cache() override {
    graphs.clear();  // the plans built on the handle go first
    if (handle) fe::detail::destroy_handle(handle);
  }
  cudnnHandle_t handle = nullptr;
  std::map<Key, Graph> graphs;
};

Cache& cache_of(ExecContext& ctx) {
  CudaState& st = state_of(ctx);
  if (!st.cudnn) {
    auto c = std::make_unique<Cache>();
    if (fe::detail::create_handle(&c->handle) != CUDNN_STATUS_SUCCESS) c->handle = nullptr;
    st.cudnn = std::move(c);
  }
  Cache& c = static_cast<Cache&>(*st.cudnn);
  if (c.handle) fe::detail::set_stream(c.handle, static_cast<cudaStream_t>(ctx.stream().handle));
  return c;
}

// (B, T, H, D) row-major as cuDNN's [B, H, T, D].
std::shared_ptr<fe::graph::Tensor_attributes> bhtd(fe::graph::Graph& g, const char* name, Uid uid,
                                                   int64_t B, int64_t T, int64_t H, int64_t D) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, H, T, D})
                      .set_stride({T * H * D, D, H * D, 1}));
}

void as_bhtd_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, Uid uid, int64_t B,
                    int64_t T, int64_t H, int64_t D) {
  t->set_output(true).set_uid(uid).set_dim({B, H, T, D}).set_stride({T * H * D, D, H * D, 1});
}

// The graph for `key`, built on first use; a null graph when cuDNN refuses the case.
const Graph& graph_for(ExecContext& ctx, Cache& c, const Key& key) {
  auto it = c.graphs.find(key);
  if (it != c.graphs.end()) return it->second;
  Graph out;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(key.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = key.B, Tq = key.Tq, Tk = key.Tk, Hq = key.Hq, Hkv = key.Hkv, D = key.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  auto q = bhtd(*g, "q", kQ, B, Tq, Hq, D);
  auto k = bhtd(*g, "k", kK, B, Tk, Hkv, D);
  auto v = bhtd(*g, "v", kV, B, Tk, Hkv, D);
  const std::vector<int64_t> stats_dim{B, Hq, Tq, 1}, stats_stride{Hq * Tq, Tq, 1, 1};
  if (!key.backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa")
                    .set_generate_stats(true)
                    .set_attn_scale(scale)
                    .set_causal_mask_bottom_right(true);
    auto [o, stats] = g->sdpa(q, k, v, opts);
    as_bhtd_output(o, kO, B, Tq, Hq, D);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dim)
        .set_stride(stats_stride);
  } else {
    auto o = bhtd(*g, "o", kO, B, Tq, Hq, D);
    auto dout = bhtd(*g, "dout", kDO, B, Tq, Hq, D);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(kStats)
                               .set_dim(stats_dim)
                               .set_stride(stats_stride)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_backward")
                    .set_attn_scale(scale)
                    .set_causal_mask_bottom_right(true)
                    .set_deterministic_algorithm(key.deterministic);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
    as_bhtd_output(dq, kDQ, B, Tq, Hq, D);
    as_bhtd_output(dk, kDK, B, Tk, Hkv, D);
    as_bhtd_output(dv, kDV, B, Tk, Hkv, D);
  }
  const bool ok = g->validate().is_good() && g->build_operation_graph(c.handle).is_good() &&
                  g->create_execution_plans({fe::HeurMode_t::A}).is_good() &&
                  g->check_support(c.handle).is_good() && g->build_plans(c.handle).is_good() &&
                  g->get_workspace_size(out.workspace).is_good();
  if (ok) out.graph = g;
  (void)ctx;
  return c.graphs.emplace(key, std::move(out)).first->second;
}

// Distinct shapes (each direction counts) with a cuDNN graph per context.
constexpr size_t kMaxGraphs = 64;

bool aligned(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0; }

// The graph that takes this call, or null (the caller falls back).
const Graph* usable(ExecContext& ctx, bool backward, const Tensor& q, const Tensor& k,
                    std::initializer_list<const Tensor*> io, const Tensor& lse, int64_t window) {
  CudaState& st = state_of(ctx);
  if (!st.cudnn_attention || window != 0) return nullptr;
  const DType dt = q.dtype();
  if (dt != DType::BF16 && dt != DType::F16) return nullptr;
  for (const Tensor* t : io)
    if (t->dtype() != dt || !aligned(*t)) return nullptr;
  if (lse.dtype() != DType::F32 || !aligned(lse)) return nullptr;
  if (q.ndim() != 4 || k.ndim() != 4 || q.dim(1) == 0 || k.dim(1) == 0 || q.dim(0) == 0 ||
      q.dim(3) % 8 != 0)
    return nullptr;
  // Training and prefill only (as many queries as keys). A decoding step has a few queries
  // against a cache one token longer each time: every step would be a new graph (validation,
  // heuristics and plan building take 0.1-1 s), so braid's kernel, which needs no plan, takes it.
  if (q.dim(1) != k.dim(1)) return nullptr;
  if (!library().error.empty()) return nullptr;
  const Key key{backward, q.dim(0), q.dim(1),
                k.dim(1), q.dim(2), k.dim(2),
                q.dim(3), dt,       backward && st.deterministic};
  try {
    Cache& c = cache_of(ctx);
    if (!c.handle) return nullptr;
    // A run with ever new shapes (evaluation of varying lengths) would build and keep a graph
    // per shape: past kMaxGraphs new shapes go to braid's kernel.
    if (c.graphs.size() >= kMaxGraphs && c.graphs.find(key) == c.graphs.end()) return nullptr;
    const Graph& g = graph_for(ctx, c, key);
    return g.graph ? &g : nullptr;
  } catch (const std::exception&) {
    // The frontend throws where a library it opens at run time is missing (libcudart's
    // symbols, say): cuDNN does not take the case, and does not get asked again.
    if (Cache* c = static_cast<Cache*>(st.cudnn.get()))
      c->graphs[key] = Graph{};
    else
      st.cudnn_attention = false;  // not even a handle: braid's kernel from now on
    return nullptr;
  }
}

void run(ExecContext& ctx, const Graph& g, std::unordered_map<int64_t, void*>& pack,
         const char* op) {
  Cache& c = cache_of(ctx);
  Tensor ws;
  if (g.workspace > 0) ws = ctx.empty({(g.workspace + 3) / 4}, DType::F32, MemCategory::Workspace);
  auto status = g.graph->execute(c.handle, pack, ws.defined() ? ws.raw() : nullptr);
  BRAID_CHECK(status.is_good(), "{}: cuDNN failed: {}", op, status.get_message());
  ++state_of(ctx).cudnn_attention_calls;
}

}  // namespace

bool cudnn_attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q,
                             const Tensor& k, const Tensor& v, int64_t window) {
  const Graph* g = usable(ctx, false, q, k, {&out, &q, &k, &v}, lse, window);
  if (!g) return false;
  std::unordered_map<int64_t, void*> pack{
      {kQ, q.raw()}, {kK, k.raw()}, {kV, v.raw()}, {kO, out.raw()}, {kStats, lse.raw()}};
  run(ctx, *g, pack, "attention_forward");
  return true;
}

bool cudnn_attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, int64_t window) {
  const Graph* g = usable(ctx, true, q, k, {&dq, &dk, &dv, &dout, &q, &k, &v, &out}, lse, window);
  if (!g) return false;
  std::unordered_map<int64_t, void*> pack{{kQ, q.raw()},   {kK, k.raw()},       {kV, v.raw()},
                                          {kO, out.raw()}, {kStats, lse.raw()}, {kDO, dout.raw()},
                                          {kDQ, dq.raw()}, {kDK, dk.raw()},     {kDV, dv.raw()}};
  run(ctx, *g, pack, "attention_backward");
  return true;
}

void set_cudnn_attention(ExecContext& ctx, bool enabled) {
  state_of(ctx).cudnn_attention = enabled;
}

int64_t cudnn_attention_calls(ExecContext& ctx) { return state_of(ctx).cudnn_attention_calls; }

std::string cudnn_status() {
  const Library& l = library();
  return l.error.empty() ? "cuDNN fused attention, " + l.version
                         : "braid's kernel (cuDNN: " + l.error + ")";
}

}  // namespace braid::cuda
