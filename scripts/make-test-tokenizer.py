#!/usr/bin/env python3
"""Trains the small test tokenizer of test/fixtures/tokenizer/.

A byte-level BPE tokenizer in the GPT-2 mould with exactly 512 ids: the 256
byte symbols, the special tokens <|endoftext|> (end of text, the eos token),
<|im_start|> and <|im_end|> (the chat template's turn markers) and the merges
learnt from ~300 kB of generated English-like text. It writes what a Hugging
Face model folder holds for its tokenizer: tokenizer.json and
tokenizer_config.json (eos token and a ChatML chat template).

The text is generated from a fixed seed, so a rerun with the pinned
tokenizers version (scripts/setup-venv.sh) writes the same files:

    .venv/bin/python scripts/make-test-tokenizer.py test/fixtures/tokenizer
"""

import argparse
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers import processors, trainers

VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

WORDS = """
the of and to a in is it you that he was for on are with as I his they be at
one have this from or had by hot word but what some we can out other were all
there when up use your how said an each she which do their time if will way
about many then them write would like so these her long make thing see him two
has look more day could go come did number sound no most people my over know
water than call first who may down side been now find any new work part take
get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say
help low line differ turn cause much mean before move right boy old too same
tell does set three want air well also play small end put home read hand port
large spell add even land here must big high such follow act why ask men change
went light kind off need house picture try us again animal point mother world
near build self earth father head stand own page should country found answer
school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea
draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always
music those both mark often letter until mile river car feet care second book
carry took science eat room friend began idea fish mountain stop once base hear
horse cut sure watch color face wood main enough plain girl usual young ready
above ever red list though feel talk bird soon body dog family direct pose
leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass
since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six
table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern
pull cold notice voice unit power town fine certain fly fall lead cry dark
machine note wait plan figure star box noun field rest correct able pound done
beauty drive stood contain front teach week final gave green oh quick develop
ocean warm free minute strong special mind behind clear tail produce fact
street inch multiply nothing course stay wheel full force blue object decide
surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate miss
brought heat snow tire bring yes distant fill east paint language among café
naïve façade über Zürich 東京 privacy gradient noise clip epsilon delta
""".split()


def sentence(rng):
    """One sentence: capitalized, with a comma or a number now and then."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 16))]
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 2000)))
    if rng.random() < 0.3:
        at = rng.randrange(1, len(words))
        words[at - 1] += ","
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "?", "!"])


def corpus(rng, size):
    """Paragraphs of sentences until `size` characters."""
    lines, total = [], 0
    while total < size:
        line = " ".join(sentence(rng) for _ in range(rng.randint(1, 5)))
        lines.append(line)
        total += len(line) + 1
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write the tokenizer files to")
    parser.add_argument("--size", type=int, default=300_000,
                        help="characters of training text (default 300000)")
    args = parser.parse_args()

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    # Like GPT-2's: no special tokens are added, offsets keep their spaces.
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tokenizer.train_from_iterator(corpus(random.Random(20261123), args.size),
                                  trainer=trainer)
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        sys.exit(f"make-test-tokenizer: trained {tokenizer.get_vocab_size()}"
                 f" ids, not {VOCAB_SIZE}: give more text (--size)")

    os.makedirs(args.out, exist_ok=True)
    tokenizer.save(os.path.join(args.out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "model_max_length": 1024,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w",
              encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
