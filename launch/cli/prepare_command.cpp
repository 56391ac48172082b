// `braid prepare`: tokenize text files into train/val shards plus tokenizer.json and meta.json.
#include <cstdio>

#include "data/prepare.h"
#include "launch/cli/commands.h"

namespace braid {

void add_prepare_command(CLI::App& app) {
  auto opts = std::make_shared<PrepareOptions>();
  auto* c = app.add_subcommand("prepare", "Tokenize text files into train/val token shards");
  c->add_option("--input,-i", opts->inputs,
                "Text file or folder (recursed; files read in sorted order); repeatable. "
                "Each file is one document, except .jsonl files: one sample per line, "
                "{\"text\": ...}, {\"prompt\": ..., \"completion\": ...} (the prompt is "
                "not trained on) or {\"messages\": [{\"role\": ..., \"content\": ...}, ...]} "
                "(rendered by the --tokenizer model's chat template; only the assistant turns "
                "are trained on).")
      ->required();
  c->add_option("--out,-o", opts->out_dir,
                "Output folder for braid_tokenizer.json, train.bin, val.bin and meta.json")
      ->required();
  c->add_option("--tokenizer", opts->tokenizer,
                "byte (256 tokens, one per byte), bpe (byte-level BPE trained on the input), or "
                "the path of a Hugging Face model folder or tokenizer.json (its tokenizer, with "
                "the folder's tokenizer_config.json: bos/eos tokens around every document)")
      ->capture_default_str();
  c->add_option("--vocab-size", opts->vocab_size,
                "BPE vocabulary size (256 bytes + merges); default 512. The byte tokenizer is "
                "always 256.");
  c->add_option("--val-fraction", opts->val_fraction,
                "Fraction of each document (its end) held out for val.bin, in [0, 0.5]")
      ->capture_default_str();
  c->add_option("--eot", opts->eot,
                "End-of-text token put after every document: its text, 'none', or 'auto' "
                "(<|endoftext|> for bpe, none for byte)")
      ->capture_default_str();
  c->add_option("--text-field", opts->text_field,
                "Field holding a sample's text in .jsonl inputs")
      ->capture_default_str();
  c->add_flag("--force", opts->force,
              "Write into a non-empty --out folder, replacing the four output files");
  c->callback([opts] {
    PrepareSummary s = prepare(*opts);
    std::fputs(format_prepare_summary(s, opts->out_dir).c_str(), stdout);
  });
}

}  // namespace braid
