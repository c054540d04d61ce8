#!/usr/bin/env python3
"""Regenerates reference_ids_*.txt: token ids computed by llama.cpp's `llama-tokenize` (a
tokenizer written independently of Cutline's) for the multilingual corpus, on the vocabulary
`cutline model synth` writes. See README.md in this folder.

Usage: make_reference_ids.py --cutline BUILD/tools/cutline --llama-tokenize PATH [--out DIR]

The synthesized GGUF declares tokenizer.ggml.pre = "llama-bpe"; copies that differ only in that
key ("qwen2", "gpt-2") give the other pre-tokenizers the same vocabulary and merges.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Must match kSynth in reference_ids_test.cc.
SYNTH_ARGS = ["--layers", "1", "--dim", "64", "--heads", "4", "--kv-heads", "2",
              "--vocab", "1024", "--context", "256", "--type", "f16"]
VARIANTS = ["llama-bpe", "qwen2", "gpt-2"]
# Prompts with special-token text, tokenized with llama.cpp's special-token parsing.
SPECIAL_SAMPLES = [
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|>text<|end_of_text|> <|im_end|>x<|im_start|>",
    "<|im_start<|im_start|>|>",
]

FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(buf, pos, vtype):
    if vtype in FIXED:
        return pos + FIXED[vtype]
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == 9:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        for _ in range(count):
            pos = skip_value(buf, pos, etype)
        return pos
    raise ValueError(f"unknown GGUF value type {vtype}")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def set_pre(src, dst, pre):
    """Copies the GGUF at src to dst with tokenizer.ggml.pre set to `pre`."""
    buf = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3, "not a GGUF v3 file"
    pos = 24
    out = bytearray(buf[:24])
    alignment = 32
    for _ in range(n_kv):
        start = pos
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", buf, pos)
        end = skip_value(buf, pos + 4, vtype)
        if key == "tokenizer.ggml.pre":
            out += gguf_string(key) + struct.pack("<I", 8) + gguf_string(pre)
        else:
            out += buf[start:end]
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos + 4)
        pos = end
    infos_start = pos
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + nlen
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * n_dims + 4 + 8
    out += buf[infos_start:pos]
    data_start = (pos + alignment - 1) // alignment * alignment
    out += b"\0" * ((-len(out)) % alignment)
    out += buf[data_start:]
    open(dst, "wb").write(out)


def samples():
    corpus = open(os.path.join(HERE, "multilingual_corpus.txt"), encoding="utf-8",
                  newline="").read()
    lines = [line for line in corpus.split("\n") if line]
    return lines + [corpus]


def llama_ids(tool, model, text, parse_special, tmp):
    path = os.path.join(tmp, "prompt.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    cmd = [tool, "-m", model, "-f", path, "--ids", "--log-disable", "--no-bos", "--no-escape"]
    if not parse_special:
        cmd.append("--no-parse-special")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
    line = out.splitlines()[-1]
    assert line.startswith("[") and line.endswith("]"), out
    return [int(t) for t in line[1:-1].split(",") if t.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cutline", required=True)
    ap.add_argument("--llama-tokenize", required=True)
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "synth.gguf")
        subprocess.run([args.cutline, "model", "synth", "--out", base] + SYNTH_ARGS, check=True)
        for pre in VARIANTS:
            model = os.path.join(tmp, f"synth-{pre}.gguf")
            set_pre(base, model, pre)
            lines = [" ".join(map(str, llama_ids(args.llama_tokenize, model, s, False, tmp)))
                     for s in samples()]
            if pre == "llama-bpe":
                lines += [" ".join(map(str, llama_ids(args.llama_tokenize, model, s, True, tmp)))
                          for s in SPECIAL_SAMPLES]
            with open(os.path.join(args.out, f"reference_ids_{pre}.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
            print(f"{pre}: {len(lines)} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
