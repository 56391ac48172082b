// all_sum_doubles and all_max_ints over a Communicator.
#include "parallel/scalar_reduce.h"

#include <cstring>

namespace braid {

std::vector<double> all_sum_doubles(Communicator& comm, const std::vector<double>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (comm.size() == 1 || n == 0) return values;
  // A double is two i32 words on the wire: i32 is moved bit for bit, never converted.
  Tensor in = Tensor::empty({2 * n}, DType::I32);
  std::memcpy(in.raw(), values.data(), sizeof(double) * values.size());
  Tensor out = Tensor::empty({2 * n * comm.size()}, DType::I32);
  comm.all_gather(in, out).wait();
  std::vector<double> sum(values.size(), 0.0);
  const double* all = static_cast<const double*>(out.raw());
  for (int r = 0; r < comm.size(); ++r)
    for (int64_t i = 0; i < n; ++i) sum[i] += all[r * n + i];
  return sum;
}

namespace {
// Strings travel as i32 tensors (the element types the communicator moves bit for bit).
Tensor pack_string(const std::string& s) {
  Tensor t = Tensor::zeros({static_cast<int64_t>((s.size() + 3) / 4)}, DType::I32);
  std::memcpy(t.raw(), s.data(), s.size());
  return t;
}
}  // namespace

std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine) {
  Tensor len = Tensor::from_vector_i32({static_cast<int32_t>(mine.size())}, {1});
  Tensor lens = Tensor::empty({comm.size()}, DType::I32);
  comm.all_gather(len, lens).wait();
  std::vector<std::string> out;
  if (comm.rank() != 0) {
    if (!mine.empty()) comm.send(pack_string(mine), 0, 0).wait();
    return out;
  }
  out.resize(static_cast<size_t>(comm.size()));
  out[0] = mine;
  for (int r = 1; r < comm.size(); ++r) {
    const int32_t n = lens.data<int32_t>()[r];
    if (n == 0) continue;
    Tensor buf = Tensor::zeros({(n + 3) / 4}, DType::I32);
    comm.recv(buf, r, 0).wait();
    out[static_cast<size_t>(r)].assign(static_cast<const char*>(buf.raw()), static_cast<size_t>(n));
  }
  return out;
}

std::vector<int> all_max_ints(Communicator& comm, const std::vector<int>& values) {
  if (comm.size() == 1 || values.empty()) return values;
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::I32);
  for (size_t i = 0; i < values.size(); ++i) t.i32()[i] = values[i];
  comm.all_reduce(t, ReduceOp::Max).wait();
  return std::vector<int>(t.i32(), t.i32() + values.size());
}

}  // namespace braid
