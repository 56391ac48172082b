// DataConfig validation.
#include "data/data_config.h"

namespace braid {

void DataConfig::validate() const {
  if (dir.empty()) config_error("dir", "dir is empty; expected the directory written by `braid prepare`");
  if (micro_batch < 1) config_error("micro_batch", "micro_batch is {}; expected >= 1", micro_batch);
  if (seq_len < 1) config_error("seq_len", "seq_len is {}; expected >= 1", seq_len);
  if (grad_accum < 1) config_error("grad_accum", "grad_accum is {}; expected >= 1", grad_accum);
  if (global_batch < 0)
    config_error("global_batch", "global_batch is {}; expected >= 0 (0: micro_batch x grad_accum x data-parallel ranks)", global_batch);
  if (epochs < 0) config_error("epochs", "epochs is {}; expected >= 0 (0: no fixed number of passes)", epochs);
  if (prefetch < 0 || prefetch > 64) config_error("prefetch", "prefetch is {}; expected 0..64", prefetch);
}

}  // namespace braid
