#!/usr/bin/python3
"""Build models/tiny-chat: a tiny GPT-style chat model, trained and exported deterministically.

Run from anywhere (needs Debian's python3-torch 1.13 and python3-onnx; nothing is downloaded):

    /usr/bin/python3 models/build/build_tiny_chat.py

It learns a byte-level BPE tokenizer on corpus.txt, trains a 4-layer decoder on the
conversations rendered with the ChatML template, and writes model.onnx (Hugging Face /
Optimum decoder-with-past layout), config.json, generation_config.json, tokenizer.json,
tokenizer_config.json and README.md. Every source of nondeterminism is pinned (seeds,
one CPU thread, deterministic algorithms, a fixed number of steps), so two runs on the
same machine write byte-identical files.
"""

import hashlib
import json
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tiny-chat"
CORPUS = HERE / "corpus.txt"

VOCAB_SIZE = 512
D_MODEL = 128
N_LAYERS = 4
N_HEADS = 4
# Multi-query attention (one KV head shared by every query head, as in Gemma 2B and Falcon): the KV
# cache, which every decoding step copies in and out of onnxruntime, is 4x smaller than with one KV
# head per query head, and that copying is what limits batched decoding of a model this small.
N_KV_HEADS = 1
HEAD_DIM = D_MODEL // N_HEADS
KV_DIM = N_KV_HEADS * HEAD_DIM
GROUP = N_HEADS // N_KV_HEADS
CONTEXT = 256
TRAIN_STEPS = 900
BATCH = 8
LR = 3e-3
SEED = 1234
OPSET = 17

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Specials take the last ids, after the 256 bytes and the learned merges.
EOT_ID, IM_START_ID, IM_END_ID = range(VOCAB_SIZE - len(SPECIAL_TOKENS), VOCAB_SIZE)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The GPT-2 split used by the tokenizers ByteLevel pre-tokenizer (use_regex: true), written for
# Python's re: [^\W\d_] is a letter and \d a number, which equals \p{L} / \p{N} on this corpus.
GPT2_SPLIT = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
)


def pin_determinism():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------- corpus and chat template


def read_conversations():
    conversations, turns = [], []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        if line == "---":
            if turns:
                conversations.append(turns)
            turns = []
            continue
        m = re.match(r"^(system|user|assistant): (.*)$", line)
        if m:
            turns.append([m.group(1), m.group(2)])
        else:
            turns[-1][1] += "\n" + line
    if turns:
        conversations.append(turns)
    return conversations


def render_chat(turns):
    """Same text as CHAT_TEMPLATE renders (without the generation prompt)."""
    return "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)


# ---------------------------------------------------------------- byte-level BPE tokenizer


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map used by ByteLevel."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()
SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


def pre_tokenize(text):
    return ["".join(BYTE_CHARS[b] for b in piece.encode("utf-8")) for piece in GPT2_SPLIT.findall(text)]


def learn_bpe(texts):
    words = Counter()
    for text in texts:
        for part in SPECIAL_SPLIT.split(text):
            if part and part not in SPECIAL_TOKENS:
                words.update(pre_tokenize(part))
    vocab = {BYTE_CHARS[b]: b for b in range(256)}
    merges = []
    split = {w: list(w) for w in words}
    while len(vocab) < VOCAB_SIZE - len(SPECIAL_TOKENS):
        pairs = Counter()
        for w, count in words.items():
            symbols = split[w]
            for a, b in zip(symbols, symbols[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        # Highest count wins; ties go to the smallest pair so the result never depends on dict order.
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = best[0] + best[1]
        if merged not in vocab:
            vocab[merged] = len(vocab)
        for w in words:
            split[w] = merge_pair(split[w], best)
    assert len(vocab) == VOCAB_SIZE - len(SPECIAL_TOKENS), "corpus too small for the vocabulary size"
    return vocab, merges


def merge_pair(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.special = {t: EOT_ID + i for i, t in enumerate(SPECIAL_TOKENS)}

    def encode(self, text):
        ids = []
        for part in SPECIAL_SPLIT.split(text):
            if part in self.special:
                ids.append(self.special[part])
            elif part:
                for word in pre_tokenize(part):
                    ids.extend(self.vocab[s] for s in self.bpe(word))
        return ids

    def bpe(self, word):
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p, math.inf), p) for p in zip(symbols, symbols[1:])]
            rank, pair = min(ranked)
            if rank == math.inf:
                break
            symbols = merge_pair(symbols, pair)
        return symbols


def tokenizer_json(vocab, merges):
    added = [
        {
            "id": EOT_ID + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {**vocab, **{t: EOT_ID + i for i, t in enumerate(SPECIAL_TOKENS)}},
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


# ---------------------------------------------------------------- model


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, D_MODEL + 2 * KV_DIM)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.out = nn.Linear(4 * D_MODEL, D_MODEL)

    def forward(self, x, allowed, past_k, past_v):
        b, t = x.shape[0], x.shape[1]
        q, k, v = self.qkv(self.ln1(x)).split([D_MODEL, KV_DIM, KV_DIM], dim=2)
        # The GROUP query heads that share a KV head are stacked as extra query rows, so attention is
        # one small matrix product per (sequence, KV head): [b, kv_heads, group * t, head_dim].
        q = q.reshape(b, t, N_KV_HEADS, GROUP, HEAD_DIM).permute(0, 2, 3, 1, 4)
        q = q.reshape(b, N_KV_HEADS, GROUP * t, HEAD_DIM)
        k, v = (z.reshape(b, t, N_KV_HEADS, HEAD_DIM).transpose(1, 2) for z in (k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD_DIM))
        # A finite fill keeps rows with no visible key (left-padding queries) free of NaN.
        att = att.reshape(b, N_KV_HEADS, GROUP, t, -1).masked_fill(~allowed, torch.finfo(torch.float32).min)
        att = att.softmax(dim=-1).reshape(b, N_KV_HEADS, GROUP * t, -1)
        y = (att @ v).reshape(b, N_KV_HEADS, GROUP, t, HEAD_DIM).permute(0, 3, 1, 2, 4).reshape(b, t, D_MODEL)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x, k, v


class TinyChat(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.wpe = nn.Embedding(CONTEXT, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.wte(input_ids) + self.wpe(position_ids)
        # Key j is visible to query i iff it is not padding and not in the future. Positions are
        # derived with cumsum so that every length stays dynamic in the exported graph; the new
        # tokens are the last `seq` of the `past + seq` keys.
        key_pos = torch.cumsum(torch.ones_like(attention_mask[0]), dim=0) - 1
        query_pos = torch.cumsum(torch.ones_like(input_ids[0]), dim=0) - 1
        query_pos = query_pos + (key_pos[-1] - query_pos[-1])
        causal = key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)
        allowed = causal[None, None, None] & (attention_mask > 0)[:, None, None, None, :]
        presents = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, allowed, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return (logits, *presents)

    def empty_past(self, batch):
        return [torch.zeros(batch, N_KV_HEADS, 0, HEAD_DIM) for _ in range(2 * N_LAYERS)]


# ---------------------------------------------------------------- training


def encode_for_training(tok, turns):
    """Token ids of a rendered conversation, and which of them are learned: only the assistant's
    replies and their <|im_end|>, so the small model spends its capacity on answering and ending
    its turn rather than on predicting questions."""
    ids, learned = [], []
    for role, content in turns:
        for text, learn in ((f"<|im_start|>{role}\n", False), (content + "<|im_end|>", role == "assistant"), ("\n", False)):
            part = tok.encode(text)
            ids += part
            learned += [learn] * len(part)
    assert ids == tok.encode(render_chat(turns)), "turn boundaries must fall on pre-token boundaries"
    return ids + [EOT_ID], learned + [False]


def training_stream(tok, conversations):
    encoded = [encode_for_training(tok, c) for c in conversations]
    assert max(len(ids) for ids, _ in encoded) < CONTEXT
    return encoded


def sample_batch(encoded, gen):
    """Rows start at a conversation (position 0, as prompts do) and are packed with more; targets
    that are not learned are set to -100, cross_entropy's ignore_index."""
    rows, targets = [], []
    for _ in range(BATCH):
        row, learned = [], []
        while len(row) < CONTEXT + 1:
            ids, mask = encoded[int(torch.randint(len(encoded), (1,), generator=gen))]
            row += ids
            learned += mask
        rows.append(row[:CONTEXT])
        targets.append([t if keep else -100 for t, keep in zip(row[1 : CONTEXT + 1], learned[1 : CONTEXT + 1])])
    return torch.tensor(rows), torch.tensor(targets)


def train(model, encoded):
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    warmup = 30
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / TRAIN_STEPS))),
    )
    positions = torch.arange(CONTEXT).unsqueeze(0).expand(BATCH, CONTEXT)
    mask = torch.ones(BATCH, CONTEXT, dtype=torch.int64)
    started = time.time()
    loss_value = float("nan")
    for step in range(TRAIN_STEPS):
        inputs, targets = sample_batch(encoded, gen)
        logits = model(inputs, mask, positions, *model.empty_past(BATCH))[0]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_value = loss.item()
        if step % 100 == 0 or step == TRAIN_STEPS - 1:
            print(f"step {step:5d}  loss {loss_value:.4f}  {time.time() - started:6.1f}s", flush=True)
    return loss_value


@torch.no_grad()
def greedy_reply(model, tok, user_text, max_new=100):
    """Sanity check through the KV-cache path the exported graph uses."""
    ids = tok.encode(render_chat([("user", user_text)]) + "<|im_start|>assistant\n")
    past = model.empty_past(1)
    inputs, out, pos = ids, [], 0
    for _ in range(max_new):
        n = len(inputs)
        logits, *past = model(
            torch.tensor([inputs]),
            torch.ones(1, pos + n, dtype=torch.int64),
            torch.arange(pos, pos + n).unsqueeze(0),
            *past,
        )
        pos += n
        nxt = int(logits[0, -1].argmax())
        if nxt >= EOT_ID:  # any special token ends the reply
            break
        out.append(nxt)
        inputs = [nxt]
    inv = {v: k for k, v in tok.vocab.items()}
    byte_of = {c: b for b, c in BYTE_CHARS.items()}
    return bytes(byte_of[c] for i in out for c in inv[i]).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- export


def export_onnx(model, path):
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for i in range(N_LAYERS):
        for kind in ("key", "value"):
            names_in.append(f"past_key_values.{i}.{kind}")
            names_out.append(f"present.{i}.{kind}")
            axes[f"past_key_values.{i}.{kind}"] = {0: "batch_size", 2: "past_sequence_length"}
            axes[f"present.{i}.{kind}"] = {0: "batch_size", 2: "total_sequence_length"}
    # Trace with a non-trivial past so no length is specialised to a constant.
    batch, seq, past_len = 2, 3, 2
    example = (
        torch.zeros(batch, seq, dtype=torch.int64),
        torch.ones(batch, past_len + seq, dtype=torch.int64),
        torch.arange(past_len, past_len + seq).unsqueeze(0).expand(batch, seq).contiguous(),
        *[torch.zeros(batch, N_KV_HEADS, past_len, HEAD_DIM) for _ in range(2 * N_LAYERS)],
    )
    torch.onnx.export(
        model,
        example,
        str(path),
        input_names=names_in,
        output_names=names_out,
        dynamic_axes=axes,
        opset_version=OPSET,
        do_constant_folding=True,
    )
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main():
    pin_determinism()
    OUT.mkdir(parents=True, exist_ok=True)
    conversations = read_conversations()
    texts = [render_chat(c) for c in conversations]
    vocab, merges = learn_bpe(texts)
    tok = Tokenizer(vocab, merges)
    encoded = training_stream(tok, conversations)
    print(f"{len(conversations)} conversations, {sum(len(ids) for ids, _ in encoded)} tokens, {len(merges)} merges")

    model = TinyChat()
    n_params = sum(p.numel() for p in model.parameters())
    final_loss = train(model, encoded)
    model.eval()

    export_onnx(model, OUT / "model.onnx")
    special = {t: EOT_ID + i for i, t in enumerate(SPECIAL_TOKENS)}
    write_json(OUT / "tokenizer.json", tokenizer_json(vocab, merges))
    write_json(
        OUT / "tokenizer_config.json",
        {
            "added_tokens_decoder": {
                str(i): {
                    "content": t,
                    "lstrip": False,
                    "normalized": False,
                    "rstrip": False,
                    "single_word": False,
                    "special": True,
                }
                for t, i in special.items()
            },
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": None,
            "chat_template": CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": CONTEXT,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": None,
        },
    )
    write_json(
        OUT / "config.json",
        {
            "architectures": ["TinyChatForCausalLM"],
            "model_type": "taskline-tiny-chat",
            "hidden_size": D_MODEL,
            "intermediate_size": 4 * D_MODEL,
            "num_hidden_layers": N_LAYERS,
            "num_attention_heads": N_HEADS,
            "num_key_value_heads": N_KV_HEADS,
            "head_dim": HEAD_DIM,
            "vocab_size": VOCAB_SIZE,
            "max_position_embeddings": CONTEXT,
            "hidden_act": "gelu",
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
            "use_cache": True,
            "bos_token_id": EOT_ID,
            "eos_token_id": IM_END_ID,
            "pad_token_id": EOT_ID,
        },
    )
    write_json(
        OUT / "generation_config.json",
        {
            "bos_token_id": EOT_ID,
            "eos_token_id": [IM_END_ID, EOT_ID],
            "pad_token_id": EOT_ID,
            "do_sample": False,
            "max_new_tokens": 128,
        },
    )

    samples = [(q, greedy_reply(model, tok, q)) for q in ("What is the capital of France?", "Tell me a joke.", "What is Taskline?")]
    for q, a in samples:
        print(f"> {q}\n{a}")
    write_readme(n_params, final_loss, len(conversations), sum(len(ids) for ids, _ in encoded), samples)


def write_readme(n_params, final_loss, n_conversations, n_tokens, samples):
    digest = hashlib.sha256((OUT / "model.onnx").read_bytes()).hexdigest()
    size = os.path.getsize(OUT / "model.onnx")
    examples = "\n".join(f"- `{q}` → `{a}`" for q, a in samples)
    (OUT / "README.md").write_text(
        f"""# tiny-chat

A tiny GPT-style chat model built for Taskline's tests, benchmarks and local development. It is a
real transformer with a KV cache, so it exercises the same ONNX Runtime generation code as a large
exported model, but it only knows the {n_conversations} conversations in `models/build/corpus.txt`
and answers anything else with plausible-looking nonsense.

## Facts

- Decoder-only transformer: {N_LAYERS} layers, {N_HEADS} query heads sharing {N_KV_HEADS} KV head(s)
  (multi-/grouped-query attention, which keeps the KV cache small), d_model {D_MODEL}, head_dim {HEAD_DIM},
  MLP 4x with GELU, pre-LayerNorm, learned absolute positions, tied input/output embeddings.
- {n_params:,} parameters, float32; `model.onnx` is {size:,} bytes (opset {OPSET}).
- Context {CONTEXT} tokens (`max_position_embeddings`: positions past it are out of range).
- Tokenizer: byte-level BPE (GPT-2 style, {VOCAB_SIZE} ids: 256 bytes, learned merges, then
  `<|endoftext|>`={EOT_ID}, `<|im_start|>`={IM_START_ID}, `<|im_end|>`={IM_END_ID}).
- Chat format: ChatML (`chat_template` in `tokenizer_config.json`). The model ends its turn with
  `<|im_end|>`, the `eos_token`; `generation_config.json` lists `<|im_end|>` and `<|endoftext|>` as
  stop ids. Greedy decoding by default.
- Trained {TRAIN_STEPS} steps of {BATCH}x{CONTEXT} tokens on {n_tokens} corpus tokens (loss on the
  assistant's replies only), final loss {final_loss:.4f}; a few minutes on one CPU thread.
- `model.onnx` sha256: `{digest}`

## ONNX layout (Hugging Face / Optimum decoder with past)

Inputs: `input_ids` [batch, seq] int64, `attention_mask` [batch, past+seq] int64 (0 = padding, left
padding supported), `position_ids` [batch, seq] int64, `past_key_values.{{i}}.key|value`
[batch, {N_KV_HEADS}, past, {HEAD_DIM}] float32 for i in 0..{N_LAYERS - 1} (past may be 0).
Outputs: `logits` [batch, seq, {VOCAB_SIZE}], `present.{{i}}.key|value` [batch, {N_KV_HEADS}, past+seq, {HEAD_DIM}].

## Greedy samples (PyTorch, through the KV-cache path)

{examples}

## Rebuild

```sh
/usr/bin/python3 models/build/build_tiny_chat.py
```

Needs Debian's `python3-torch` (1.13), `python3-onnx` (1.12) and `libopenblas0-serial`
(`apt-get install -y python3-torch python3-onnx libopenblas0-serial`); nothing is downloaded.
Debian's torch does its matrix products in the system BLAS: OpenBLAS takes 5 to 10 minutes,
the reference BLAS about four times as long. Seeds, one CPU thread, deterministic algorithms
and a fixed step count make the run reproducible: two runs on the same machine and packages
write byte-identical files (checked by comparing sha256 sums). Another BLAS, torch version or
CPU gives different floating-point rounding and so a slightly different, equally valid model;
the tests in packages/inference check behaviour that any good build has (answers to corpus
questions), not exact weights.
""",
        encoding="utf-8",
    )


if __name__ == "__main__":
    sys.exit(main())
