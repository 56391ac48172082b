// A Hugging Face checkpoint quantised by bitsandbytes (tests/data/bnb_llama, written with
// bitsandbytes' own kernels by tools/make_bnb_checkpoint.py) loads with every quantised linear
// equal, bit for bit, to bitsandbytes' dequantize_4bit of it (tests/data/
// bnb_llama_dequant.safetensors), and every plain tensor as stored; quantised again as a QLoRA
// run without double quantisation does, each reads back to the same values.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/kernels/quantize.h"
#include "core/safetensors.h"
#include "launch/io/model_io.h"

namespace braid {
namespace {

const std::string kData = std::string(BRAID_SOURCE_DIR) + "/tests/data/";

TEST(BnbCheckpoint, DequantisedWeightsAreBitsandbytes) {
  const LoadedModel m = load_model(kData + "bnb_llama");
  const SafetensorsFile ref = SafetensorsFile::open(kData + "bnb_llama_dequant.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(kData + "bnb_llama/model.safetensors");
  int quantised = 0;
  for (const std::string& name : ref.names()) {
    const Parameter* p = m.model->find_parameter(name);
    ASSERT_NE(p, nullptr) << name;
    const Tensor want = ref.get(name);
    ASSERT_EQ(p->value.shape(), want.shape()) << name;
    ASSERT_EQ(std::memcmp(p->value.raw(), want.raw(), want.nbytes()), 0) << name;
    // Quantised again without double quantisation (a QLoRA run's base): the same values.
    const QuantizedWeight again = quantize_weight(*m.ctx, p->value, QuantCode::Nf4, 64, false);
    Tensor back = Tensor::empty(want.shape());
    dequantize_weight(*m.ctx, back, again);
    ASSERT_EQ(std::memcmp(back.raw(), want.raw(), want.nbytes()), 0) << name << " re-quantised";
    ++quantised;
  }
  EXPECT_EQ(quantised, 7);  // q, k, v, o, gate, up, down
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"}) {
    const Parameter* p = m.model->find_parameter(name);
    ASSERT_NE(p, nullptr) << name;
    const Tensor want = file.get(name);
    ASSERT_EQ(std::memcmp(p->value.raw(), want.raw(), want.nbytes()), 0) << name;
  }
}

}  // namespace
}  // namespace braid
