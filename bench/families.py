#!/usr/bin/env python3
"""Model families beyond the calibration set, built with our own sizes: recurrent
nets (an LSTM language model, a sequence-first bidirectional GRU, a bidirectional
LSTM tagger, a GRU language model), a
latent-diffusion U-Net, semantic segmentation, a T5-style encoder-decoder, GQA
decoders (LLaMA-style, and a Qwen2-style one with a 152 k vocabulary and tied
embeddings) and a wav2vec2-style audio classifier. Exported as the README says and
measured in fresh processes with the calibration protocol. A third list, new
families nobody built a rule on (check only): a Conformer speech encoder, a 3-D
video CNN (torchvision r3d_18), a CLIP-style dual encoder and an MLP-Mixer.

  python3 bench/families.py list          (the models the memory model was built on)
  python3 bench/families.py list-check    (the same families at other sizes: check only)
  python3 bench/families.py list-new      (four new families, `_n`: check only)
  python3 bench/families.py list-new2     (five more new families, `_n`: check only)
  python3 bench/families.py list-check3   (a third held-out round, `_c`: check only;
                                           list-check4 .. list-check8 the later rounds)
  python3 bench/families.py export NAME OUTDIR
      train-mode export (dynamo, optimize=False; the TorchScript exporter when
      dynamo fails), batch dim symbolic, weights dropped (shape-only ONNX).
  python3 bench/families.py measure NAME MODE BATCH PRECISION
      one fresh process. MODE train: 3 steps of forward, the family's loss,
      backward, AdamW step, zero_grad (autocast for amp_*, with a GradScaler
      for amp_fp16 as the calibration protocol does; model.to(bfloat16) for
      bf16). MODE infer: eval(), two forwards under inference_mode. Prints
      one JSON line with absolute max_memory_allocated / max_memory_reserved
      (what `memplan plan` predicts for a fresh process).
  python3 bench/families.py trace NAME MODE BATCH PRECISION OUT.json
      the same run with the caching allocator's history recorded: every
      allocation, free and segment with the innermost Python frames, in the
      format of bench/memtrace.py, to compare with a plan event by event.

Losses: cls = cross entropy on [B, C]; tokens = cross entropy over every
position of [..., V]; pixels = cross entropy on [B, C, H, W] with [B, H, W]
labels; mse = mean squared error against a random target of the output's shape.
"""
import functools
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.benchmark = False


# ---------------------------------------------------------------- models


class LstmLM(nn.Module):
    def __init__(self, vocab=12000, emb=512, hidden=1024, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True, dropout=0.2)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.head(self.drop(h))


class GruTagger(nn.Module):
    """Sequence-first ([S, B, F], nn.GRU's default layout) frame tagger."""

    def __init__(self, feat=80, hidden=512, layers=3, classes=48):
        super().__init__()
        self.rnn = nn.GRU(feat, hidden, num_layers=layers, bidirectional=True, dropout=0.1)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, feats):
        h, _ = self.rnn(feats)
        return self.head(h)


class LstmTagger(nn.Module):
    """Batch-first bidirectional one-layer LSTM over embeddings, no dropout."""

    def __init__(self, vocab=8000, emb=256, hidden=384, tags=20):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.head(h)


class GruLM(nn.Module):
    """Batch-first 3-layer GRU language model with dropout between layers."""

    def __init__(self, vocab=10000, emb=384, hidden=768, layers=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, num_layers=layers, batch_first=True, dropout=0.15)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.head(h)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, groups=32, p=0.1):
        super().__init__()
        self.n1 = nn.GroupNorm(groups, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.n2 = nn.GroupNorm(groups, cout)
        self.drop = nn.Dropout(p)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(self.drop(F.silu(self.n2(h))))
        return self.skip(x) + h


class AttnBlock(nn.Module):
    def __init__(self, ch, heads=4, groups=32):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(groups, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        o = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2),
                                           v.transpose(-1, -2))
        return x + self.proj(o.transpose(-1, -2).reshape(b, c, h, w))


class UNet(nn.Module):
    """A latent-diffusion-style U-Net on 4-channel 32x32 latents: GroupNorm, SiLU,
    strided-conv downsampling, nearest upsampling, skip concatenation, one
    attention block at the lowest resolution."""

    def __init__(self, cin=4, ch=(128, 256, 384)):
        super().__init__()
        self.inp = nn.Conv2d(cin, ch[0], 3, padding=1)
        self.down = nn.ModuleList()
        self.downsample = nn.ModuleList()
        c = ch[0]
        skips = [c]
        for i, co in enumerate(ch):
            self.down.append(nn.ModuleList([ResBlock(c, co), ResBlock(co, co)]))
            c = co
            skips += [c, c]
            if i + 1 < len(ch):
                self.downsample.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
                skips.append(c)
        self.mid = nn.ModuleList([ResBlock(c, c), AttnBlock(c), ResBlock(c, c)])
        self.up = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for i, co in reversed(list(enumerate(ch))):
            blocks = nn.ModuleList()
            for _ in range(3):
                blocks.append(ResBlock(c + skips.pop(), co))
                c = co
            self.up.append(blocks)
            if i > 0:
                self.upsample.append(nn.Conv2d(c, c, 3, padding=1))
        self.out_norm = nn.GroupNorm(32, c)
        self.out = nn.Conv2d(c, cin, 3, padding=1)

    def forward(self, x):
        h = self.inp(x)
        hs = [h]
        for i, blocks in enumerate(self.down):
            for blk in blocks:
                h = blk(h)
                hs.append(h)
            if i < len(self.downsample):
                h = self.downsample[i](h)
                hs.append(h)
        for blk in self.mid:
            h = blk(h)
        for i, blocks in enumerate(self.up):
            for blk in blocks:
                h = blk(torch.cat([h, hs.pop()], dim=1))
            if i < len(self.upsample):
                h = self.upsample[i](F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return self.out(F.silu(self.out_norm(h)))


class OutOf(nn.Module):
    """Returns one tensor of a model whose forward returns a dict or an HF output."""

    def __init__(self, m, key):
        super().__init__()
        self.m = m
        self.key = key

    def forward(self, *args):
        out = self.m(*args)
        return out[self.key] if isinstance(out, dict) else getattr(out, self.key)


class HFLogits(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).logits


class HFSeq2Seq(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, decoder_input_ids):
        return self.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits


class HFAudio(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_values):
        return self.m(input_values=input_values).logits


def deeplab(arch="deeplabv3_mobilenet_v3_large", classes=21):
    import torchvision
    m = getattr(torchvision.models.segmentation, arch)(
        weights=None, weights_backbone=None, num_classes=classes, aux_loss=False)
    return OutOf(m, "out")


def t5(vocab=8192, d_model=384, d_ff=1024, layers=4, heads=6):
    import transformers as T
    cfg = T.T5Config(vocab_size=vocab, d_model=d_model, d_kv=64, d_ff=d_ff, num_layers=layers,
                     num_decoder_layers=layers, num_heads=heads, use_cache=False)
    return HFSeq2Seq(T.T5ForConditionalGeneration(cfg))


def llama(vocab=32000, hidden=1024, ffn=2816, layers=4, heads=16, kv_heads=4, tied=False,
          attn="sdpa"):
    import transformers as T
    cfg = T.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                        num_hidden_layers=layers, num_attention_heads=heads,
                        num_key_value_heads=kv_heads, max_position_embeddings=4096,
                        tie_word_embeddings=tied, use_cache=False)
    cfg._attn_implementation = attn
    return HFLogits(T.LlamaForCausalLM(cfg))


def qwen(vocab=151936, hidden=512, ffn=1408, layers=4, heads=8, kv_heads=2):
    import transformers as T
    cfg = T.Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                        num_hidden_layers=layers, num_attention_heads=heads,
                        num_key_value_heads=kv_heads, tie_word_embeddings=True,
                        max_position_embeddings=4096, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return HFLogits(T.Qwen2ForCausalLM(cfg))


def wav2vec2(hidden=384, layers=4, heads=6, ffn=1536):
    import transformers as T
    cfg = T.Wav2Vec2Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=ffn, num_labels=10, feat_extract_norm="group",
                           mask_time_prob=0.0, mask_feature_prob=0.0, layerdrop=0.0)
    cfg._attn_implementation = "sdpa"
    return HFAudio(T.Wav2Vec2ForSequenceClassification(cfg))


def tokens(vocab, seq):
    return lambda b, dev: (torch.randint(0, vocab, (b, seq), device=dev),)


# name: builder, inputs(batch, device), [input names], batch axis per input, loss,
#       train batches, infer batches
MODELS = {
    "lstm_lm": (LstmLM, tokens(12000, 128), ["tokens"], [0], "tokens", [8, 32, 128], [8, 64]),
    "gru_seqfirst": (GruTagger, lambda b, d: (torch.randn(200, b, 80, device=d),), ["feats"], [1],
                     "tokens", [8, 32, 128], [8, 64]),
    "lstm_tagger": (LstmTagger, tokens(8000, 96), ["tokens"], [0], "tokens", [16, 64, 256],
                    [16, 128]),
    "gru_lm": (GruLM, tokens(10000, 64), ["tokens"], [0], "tokens", [4, 16, 64], [4, 32]),
    "unet_ldm": (UNet, lambda b, d: (torch.randn(b, 4, 32, 32, device=d),), ["latent"], [0], "mse",
                 [8, 32, 96], [8, 64]),
    "deeplab_mnv3": (deeplab, lambda b, d: (torch.randn(b, 3, 320, 320, device=d),), ["image"], [0],
                     "pixels", [4, 16, 48], [4, 32]),
    "t5_encdec": (t5, lambda b, d: (torch.randint(0, 8192, (b, 256), device=d),
                                    torch.randint(0, 8192, (b, 256), device=d)),
                  ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [4, 16, 48], [4, 32]),
    "llama_gqa": (llama, tokens(32000, 1024), ["input_ids"], [0], "tokens", [1, 4, 12], [1, 8]),
    "qwen_bigvocab": (qwen, tokens(151936, 1024), ["input_ids"], [0], "tokens", [1, 2, 6], [1, 4]),
    "wav2vec2_cls": (wav2vec2, lambda b, d: (torch.randn(b, 16000, device=d),), ["input_values"],
                     [0], "cls", [4, 16, 64], [4, 32]),
}


# Check models: the same families at other sizes (and a second segmentation
# head), never used to build the memory model, only to check it.
P = functools.partial
MODELS.update({
    "lstm_lm_b": (P(LstmLM, vocab=20000, emb=256, hidden=768, layers=3), tokens(20000, 64),
                  ["tokens"], [0], "tokens", [16, 64], [16]),
    "gru_seqfirst_b": (P(GruTagger, feat=40, hidden=384, layers=2, classes=30),
                       lambda b, d: (torch.randn(300, b, 40, device=d),), ["feats"], [1], "tokens",
                       [16, 64], [16]),
    "unet_ldm_b": (P(UNet, cin=4, ch=(96, 192, 288)),
                   lambda b, d: (torch.randn(b, 4, 48, 48, device=d),), ["latent"], [0], "mse",
                   [8, 24], [16]),
    "lraspp_mnv3": (P(deeplab, arch="lraspp_mobilenet_v3_large", classes=12),
                    lambda b, d: (torch.randn(b, 3, 256, 384, device=d),), ["image"], [0],
                    "pixels", [8, 32], [8]),
    "t5_encdec_b": (P(t5, vocab=16000, d_model=512, d_ff=1536, layers=3, heads=8),
                    lambda b, d: (torch.randint(0, 16000, (b, 128), device=d),
                                  torch.randint(0, 16000, (b, 128), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [8, 32], [8]),
    "llama_gqa_b": (P(llama, vocab=50000, hidden=768, ffn=2048, layers=6, heads=12, kv_heads=4,
                      tied=True), tokens(50000, 2048), ["input_ids"], [0], "tokens", [1, 4], [2]),
    "qwen_bigvocab_b": (P(qwen, hidden=384, ffn=1024, layers=3, heads=6, kv_heads=2),
                        tokens(151936, 512), ["input_ids"], [0], "tokens", [2, 8], [4]),
    "wav2vec2_cls_b": (P(wav2vec2, hidden=256, layers=3, heads=4, ffn=1024),
                       lambda b, d: (torch.randn(b, 24000, device=d),), ["input_values"], [0],
                       "cls", [8, 32], [8]),
})
CHECK_MODELS = [n for n in MODELS if n.endswith("_b") or n == "lraspp_mnv3"]


# ---------------------------------------------------------------- new families (check only)


class FeedForward(nn.Module):
    """Conformer feed-forward module: LayerNorm, Linear, SiLU, Dropout, Linear, Dropout."""

    def __init__(self, d, ffn, p=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, ffn), nn.SiLU(), nn.Dropout(p),
                                 nn.Linear(ffn, d), nn.Dropout(p))

    def forward(self, x):
        return self.net(x)


class ConvModule(nn.Module):
    """Conformer convolution module over [B, T, d]: LayerNorm, pointwise Conv1d to 2d,
    GLU, depthwise Conv1d, BatchNorm1d, SiLU, pointwise Conv1d, Dropout."""

    def __init__(self, d, kernel=31, p=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.glu = nn.GLU(dim=1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.act = nn.SiLU()
        self.pw2 = nn.Conv1d(d, d, 1)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        h = self.glu(self.pw1(self.norm(x).transpose(1, 2)))
        h = self.act(self.bn(self.dw(h)))
        return self.drop(self.pw2(h)).transpose(1, 2)


class ConformerBlock(nn.Module):
    """Macaron block: half-step FFN, MHSA (nn.MultiheadAttention), conv module,
    half-step FFN, LayerNorm."""

    def __init__(self, d, heads, ffn, kernel, p=0.1):
        super().__init__()
        self.ff1 = FeedForward(d, ffn, p)
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=p, batch_first=True)
        self.attn_drop = nn.Dropout(p)
        self.conv = ConvModule(d, kernel, p)
        self.ff2 = FeedForward(d, ffn, p)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x = x + 0.5 * self.ff1(x)
        h = self.attn_norm(x)
        x = x + self.attn_drop(self.attn(h, h, h, need_weights=False)[0])
        x = x + self.conv(x)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class Conformer(nn.Module):
    """Conformer-style speech encoder over [B, T, feat] filterbanks: two stride-2
    3x3 Conv2d + ReLU (4x subsampling), a Linear to d, Conformer blocks, a
    per-frame token head (CTC-like targets, trained with per-frame cross entropy)."""

    def __init__(self, feat=80, d=256, layers=8, heads=4, ffn=1024, kernel=31, vocab=256):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, d, 3, stride=2), nn.ReLU(),
                                 nn.Conv2d(d, d, 3, stride=2), nn.ReLU())
        self.sub_out = nn.Linear(d * (((feat - 1) // 2 - 1) // 2), d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([ConformerBlock(d, heads, ffn, kernel) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, feats):
        h = self.sub(feats.unsqueeze(1))  # [B, d, T/4, feat/4]
        x = self.drop(self.sub_out(h.transpose(1, 2).flatten(2)))
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def video(arch="r3d_18", classes=400):
    import torchvision
    return getattr(torchvision.models.video, arch)(weights=None, num_classes=classes)


class Block(nn.Module):
    """Pre-norm transformer block, attention through F.scaled_dot_product_attention
    (causal in the text tower), GELU MLP."""

    def __init__(self, d, heads, causal=False, mlp=4):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp * d), nn.GELU(), nn.Linear(mlp * d, d))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, self.heads, -1)).permute(
            2, 0, 3, 1, 4).unbind(0)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(o.transpose(1, 2).flatten(2))
        return x + self.mlp(self.ln2(x))


class ImageTower(nn.Module):
    """Small ViT: patch Conv2d, class token, learned positions, blocks, the class
    token's features projected to the joint embedding."""

    def __init__(self, image=224, patch=16, d=384, layers=6, heads=6, embed=256):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.ln_pre = nn.LayerNorm(d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln_post = nn.LayerNorm(d)
        self.proj = nn.Linear(d, embed, bias=False)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.ln_post(self.blocks(self.ln_pre(x)))
        return self.proj(x[:, 0])


class TextTower(nn.Module):
    """Small causal text transformer; the features at the end-of-text token (the
    largest id, as CLIP's tokenizer makes it) projected to the joint embedding."""

    def __init__(self, vocab=49408, ctx=77, d=256, layers=4, heads=4, embed=256):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.01)
        self.blocks = nn.Sequential(*[Block(d, heads, causal=True) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.proj = nn.Linear(d, embed, bias=False)

    def forward(self, ids):
        x = self.ln(self.blocks(self.tok(ids) + self.pos))
        eot = x[torch.arange(x.shape[0], device=x.device), ids.argmax(dim=-1)]
        return self.proj(eot)


class Clip(nn.Module):
    """CLIP-style dual encoder: L2-normalised image and text embeddings, a learned
    logit scale; returns the [B, B] image-text logits, whose cross entropy against
    the diagonal is the contrastive loss (the "cls" loss here, random labels)."""

    def __init__(self, embed=256):
        super().__init__()
        self.visual = ImageTower(embed=embed)
        self.text = TextTower(embed=embed)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, image, input_ids):
        img = F.normalize(self.visual(image), dim=-1)
        txt = F.normalize(self.text(input_ids), dim=-1)
        return self.logit_scale.exp() * img @ txt.t()


class MixerBlock(nn.Module):
    """Token-mixing MLP over the transposed patches, then a channel MLP."""

    def __init__(self, tokens, d, token_mlp, channel_mlp):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, token_mlp), nn.GELU(),
                                       nn.Linear(token_mlp, tokens))
        self.ln2 = nn.LayerNorm(d)
        self.channel_mlp = nn.Sequential(nn.Linear(d, channel_mlp), nn.GELU(),
                                         nn.Linear(channel_mlp, d))

    def forward(self, x):
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.ln2(x))


class Mixer(nn.Module):
    """MLP-Mixer (S/16-like): patch Conv2d, Mixer blocks, LayerNorm, mean over
    patches, classifier."""

    def __init__(self, image=224, patch=16, d=512, depth=8, token_mlp=256, channel_mlp=2048,
                 classes=1000):
        super().__init__()
        self.stem = nn.Conv2d(3, d, patch, stride=patch)
        n = (image // patch) ** 2
        self.blocks = nn.Sequential(*[MixerBlock(n, d, token_mlp, channel_mlp)
                                      for _ in range(depth)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.blocks(x)).mean(dim=1))


def image(size=224):
    return lambda b, d: (torch.randn(b, 3, size, size, device=d),)


MODELS.update({
    "conformer_n": (Conformer, lambda b, d: (torch.randn(b, 512, 80, device=d),), ["feats"], [0],
                    "tokens", [16, 96], [32]),
    "r3d_n": (video, lambda b, d: (torch.randn(b, 3, 16, 112, 112, device=d),), ["video"], [0],
              "cls", [4, 24], [16]),
    "clip_n": (Clip, lambda b, d: (torch.randn(b, 3, 224, 224, device=d),
                                   torch.randint(0, 49408, (b, 77), device=d)),
               ["image", "input_ids"], [0, 0], "cls", [32, 192], [64]),
    "mixer_n": (Mixer, image(224), ["image"], [0], "cls", [32, 160], [64]),
})
NEW_MODELS = [n for n in MODELS if n.endswith("_n")]


# A second round of new families (check only, never evidence): a ConvNeXt
# (depthwise 7x7 convolutions, LayerNorm over permuted channels-last tensors,
# layer scale, stochastic depth), an EfficientNet (SiLU in place,
# squeeze-and-excitation gates, stochastic depth), a ResNeXt (grouped 3x3
# convolutions), a Swin transformer (shifted
# windows: roll, window partition, a relative-position bias gathered from a
# table, an attention mask) and a SegFormer (spatial-reduction attention,
# Mix-FFN with a depthwise convolution, bilinear upsampling of the decoder's
# features, per-pixel loss at a quarter of the resolution).


def convnext(dims=(48, 96, 192, 384), depths=(2, 2, 4, 2), classes=100):
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    cfg = [CNBlockConfig(dims[i], dims[i + 1] if i + 1 < len(dims) else None, depths[i])
           for i in range(len(dims))]
    return ConvNeXt(cfg, stochastic_depth_prob=0.1, num_classes=classes)


def effnet(width=0.75, depth=0.8, classes=100):
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=width, depth_mult=depth)
    return EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.2, num_classes=classes,
                        last_channel=last)


def swin(dim=48, depths=(2, 2, 4, 2), heads=(3, 6, 12, 24), classes=100):
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=dim, depths=list(depths),
                           num_heads=list(heads), window_size=[7, 7], stochastic_depth_prob=0.1,
                           num_classes=classes)


def resnext(layers=(2, 2, 3, 2), groups=16, width=4, classes=100):
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, list(layers), groups=groups, width_per_group=width,
                  num_classes=classes)


class HFPixels(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values).logits


def segformer(hidden=(32, 64, 160, 256), heads=(1, 2, 5, 8), labels=19):
    from transformers import SegformerConfig, SegformerForSemanticSegmentation
    cfg = SegformerConfig(num_channels=3, num_encoder_blocks=4, depths=[2, 2, 2, 2],
                          sr_ratios=[8, 4, 2, 1], hidden_sizes=list(hidden),
                          num_attention_heads=list(heads), decoder_hidden_size=192,
                          num_labels=labels, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, drop_path_rate=0.1)
    return HFPixels(SegformerForSemanticSegmentation(cfg))


MODELS.update({
    "convnext_n": (convnext, image(192), ["image"], [0], "cls", [32, 128], [64]),
    "effnet_n": (effnet, image(192), ["image"], [0], "cls", [32, 128], [64]),
    "swin_n": (swin, image(224), ["image"], [0], "cls", [16, 96], [32]),
    "segformer_n": (segformer, image(256), ["pixel_values"], [0], "pixels", [8, 48], [16]),
    "resnext_n": (resnext, image(160), ["image"], [0], "cls", [32, 128], [64]),
    # Another size, a check of the 1x1 convolution rules (bench/cudnn_1x1_ws.py).
    "resnext_n_b": (P(resnext, layers=(1, 2, 2, 1), groups=8, width=8), image(144), ["image"],
                    [0], "cls", [24, 96], [48]),
})
NEW2_MODELS = ["convnext_n", "effnet_n", "swin_n", "segformer_n", "resnext_n"]
CHECK_MODELS.append("resnext_n_b")


# A third held-out round (`_c`, check only, never evidence): the families
# at sizes and configurations none of the rules were built on: a 3-layer LSTM
# language model, a 2-layer wide GRU, a 4-level U-Net on 64x64 latents,
# DeepLabV3 on a dilated ResNet-50 (output stride 8), a 6-layer T5 at sequence
# 512, a multi-query LLaMA (one key-value head), a 2-layer 152 k-vocabulary Qwen2
# and a wav2vec2 with the layer-norm feature encoder (the "large" variant's
# stable layer norm). Measured in fp32, amp_bf16, amp_fp16 and bf16.


def wav2vec2_ln(hidden=320, layers=4, heads=5, ffn=1280, conv_dim=(512,) * 7):
    import transformers as T
    cfg = T.Wav2Vec2Config(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=ffn, num_labels=12, feat_extract_norm="layer",
                           conv_dim=list(conv_dim),
                           do_stable_layer_norm=True, mask_time_prob=0.0, mask_feature_prob=0.0,
                           layerdrop=0.0)
    cfg._attn_implementation = "sdpa"
    return HFAudio(T.Wav2Vec2ForSequenceClassification(cfg))


MODELS.update({
    "lstm_lm_c": (P(LstmLM, vocab=16000, emb=384, hidden=512, layers=3), tokens(16000, 160),
                  ["tokens"], [0], "tokens", [16, 96], [32]),
    "gru_lm_c": (P(GruLM, vocab=6000, emb=256, hidden=1024, layers=2), tokens(6000, 128),
                 ["tokens"], [0], "tokens", [8, 48], [16]),
    "unet_ldm_c": (P(UNet, cin=4, ch=(64, 128, 256, 256)),
                   lambda b, d: (torch.randn(b, 4, 64, 64, device=d),), ["latent"], [0], "mse",
                   [4, 24], [8]),
    "deeplab_r50_c": (P(deeplab, arch="deeplabv3_resnet50", classes=8),
                      lambda b, d: (torch.randn(b, 3, 256, 256, device=d),), ["image"], [0],
                      "pixels", [4, 12], [4]),
    "t5_encdec_c": (P(t5, vocab=12000, d_model=256, d_ff=1024, layers=6, heads=4),
                    lambda b, d: (torch.randint(0, 12000, (b, 512), device=d),
                                  torch.randint(0, 12000, (b, 512), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [4, 16], [8]),
    "llama_mqa_c": (P(llama, vocab=24000, hidden=512, ffn=1536, layers=4, heads=8, kv_heads=1),
                    tokens(24000, 1536), ["input_ids"], [0], "tokens", [1, 4], [2]),
    "qwen_bigvocab_c": (P(qwen, hidden=640, ffn=1792, layers=2, heads=10, kv_heads=2),
                        tokens(151936, 768), ["input_ids"], [0], "tokens", [1, 4], [2]),
    "wav2vec2_ln_c": (wav2vec2_ln, lambda b, d: (torch.randn(b, 20000, device=d),),
                      ["input_values"], [0], "cls", [8, 32], [8]),
    # The same family at another size, measured after the transposed-layout
    # rules its first export led to (a check of them, never evidence).
    "wav2vec2_lnb_c": (P(wav2vec2_ln, hidden=256, layers=3, heads=4, ffn=1024,
                         conv_dim=(384,) * 7),
                       lambda b, d: (torch.randn(b, 24000, device=d),), ["input_values"], [0],
                       "cls", [12, 40], [12]),
})
CHECK3_MODELS = [n for n in MODELS if n.endswith("_c")]


# A fourth held-out round (`_d`, check only, never evidence), built after every
# rule of the third: the families at yet other sizes and shapes: a
# bidirectional LSTM tagger with a wide hidden state, a 3-level U-Net on
# 3-channel 40x40 inputs, a T5 whose encoder and decoder lengths differ (768 /
# 192), a LLaMA with 14 query and 2 key-value heads at sequence 1280, DeepLabV3
# on MobileNetV3 at 320x480, and the group-norm wav2vec2 at 7 heads over 2 s of
# audio.
MODELS.update({
    "lstm_tagger_d": (P(LstmTagger, vocab=12000, emb=320, hidden=640, tags=32),
                      tokens(12000, 200), ["tokens"], [0], "tokens", [16, 64], [32]),
    "unet_ldm_d": (P(UNet, cin=3, ch=(96, 192, 384)),
                   lambda b, d: (torch.randn(b, 3, 40, 40, device=d),), ["latent"], [0], "mse",
                   [8, 32], [16]),
    "t5_encdec_d": (P(t5, vocab=20000, d_model=384, d_ff=1536, layers=3, heads=6),
                    lambda b, d: (torch.randint(0, 20000, (b, 768), device=d),
                                  torch.randint(0, 20000, (b, 192), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [2, 8], [4]),
    "llama_gqa_d": (P(llama, vocab=40000, hidden=896, ffn=2432, layers=3, heads=14, kv_heads=2),
                    tokens(40000, 1280), ["input_ids"], [0], "tokens", [1, 4], [2]),
    "deeplab_mnv3_d": (P(deeplab, classes=6),
                       lambda b, d: (torch.randn(b, 3, 320, 480, device=d),), ["image"], [0],
                       "pixels", [4, 16], [4]),
    "wav2vec2_cls_d": (P(wav2vec2, hidden=448, layers=3, heads=7, ffn=1792),
                       lambda b, d: (torch.randn(b, 32000, device=d),), ["input_values"], [0],
                       "cls", [4, 16], [8]),
})
CHECK4_MODELS = [n for n in MODELS if n.endswith("_d")]


# A fifth held-out round (`_e`, check only, never evidence), built on the main
# of 2026-12-05 after every rule of the fourth: a 2-layer LSTM language model
# at sequence 192, a U-Net with 64/192/320 channels on 36x36 latents, a T5 at
# sequence 1024 on both sides (the S^2 relative-position bias), a LLaMA with
# 16 query and 4 key-value heads at sequence 2048 (fp32: the math kernel), a
# 150k-vocabulary Qwen with one key-value head at sequence 2048, FCN on
# ResNet-50 (a segmentation head without ASPP) at 224x288, and the group-norm
# wav2vec2 at 5 layers over 1.25 s of audio.
MODELS.update({
    "lstm_lm_e": (P(LstmLM, vocab=24000, emb=320, hidden=896, layers=2), tokens(24000, 192),
                  ["tokens"], [0], "tokens", [8, 48], [16]),
    "unet_ldm_e": (P(UNet, cin=4, ch=(64, 192, 320)),
                   lambda b, d: (torch.randn(b, 4, 36, 36, device=d),), ["latent"], [0], "mse",
                   [4, 24], [16]),
    "t5_encdec_e": (P(t5, vocab=10000, d_model=320, d_ff=1280, layers=2, heads=5),
                    lambda b, d: (torch.randint(0, 10000, (b, 1024), device=d),
                                  torch.randint(0, 10000, (b, 1024), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [2, 8], [4]),
    "llama_gqa_e": (P(llama, vocab=28000, hidden=1024, ffn=2752, layers=2, heads=16, kv_heads=4),
                    tokens(28000, 2048), ["input_ids"], [0], "tokens", [1, 3], [2]),
    "qwen_bigvocab_e": (P(qwen, hidden=448, ffn=1216, layers=2, heads=7, kv_heads=1),
                        tokens(151936, 2048), ["input_ids"], [0], "tokens", [1, 3], [2]),
    "fcn_r50_e": (P(deeplab, arch="fcn_resnet50", classes=5),
                  lambda b, d: (torch.randn(b, 3, 224, 288, device=d),), ["image"], [0],
                  "pixels", [4, 16], [8]),
    "wav2vec2_cls_e": (P(wav2vec2, hidden=320, layers=5, heads=5, ffn=1280),
                       lambda b, d: (torch.randn(b, 20000, device=d),), ["input_values"], [0],
                       "cls", [8, 24], [8]),
})
CHECK5_MODELS = [n for n in MODELS if n.endswith("_e")]


# A check of the softmax-backward rule the fifth round led to, on models it
# was not built on (`_f`, check only): a LLaMA with 8 query and 2 key-value
# heads at sequence 1536 (fp32: the math kernel's softmax over 1536 keys) and
# the same family with transformers' eager attention (softmax in float32 over
# 1280 keys, in every precision).
MODELS.update({
    "llama_gqa_f": (P(llama, vocab=16000, hidden=512, ffn=1408, layers=2, heads=8, kv_heads=2),
                    tokens(16000, 1536), ["input_ids"], [0], "tokens", [2], [2]),
    "llama_eager_f": (P(llama, vocab=16000, hidden=512, ffn=1408, layers=2, heads=8, kv_heads=2,
                        attn="eager"),
                      tokens(16000, 1280), ["input_ids"], [0], "tokens", [2], [2]),
})
CHECK6_MODELS = [n for n in MODELS if n.endswith("_f")]


# A seventh held-out round (`_g`, check only, never evidence), built on the
# main of 2026-12-06 after every rule of the earlier rounds: a 3-layer LSTM
# and a 2-layer GRU language model, a 4-level U-Net on 40x40 latents,
# DeepLabV3 (MobileNetV3) at 288x576 with 19 classes, a T5 with a 512-token
# encoder and a 128-token decoder, a LLaMA with 12 query and 3 key-value heads
# at sequence 1536, a 150k-vocabulary Qwen with 9 query and 3 key-value heads
# at sequence 1536, and wav2vec2 with the group-norm (1.5 s of audio) and the
# layer-norm feature encoder (384 channels, 1.75 s).
MODELS.update({
    "lstm_lm_g": (P(LstmLM, vocab=9000, emb=448, hidden=640, layers=3), tokens(9000, 224),
                  ["tokens"], [0], "tokens", [12, 40], [16]),
    "gru_lm_g": (P(GruLM, vocab=7000, emb=320, hidden=768, layers=2), tokens(7000, 160),
                 ["tokens"], [0], "tokens", [8, 48], [16]),
    "unet_ldm_g": (P(UNet, cin=4, ch=(96, 160, 256, 320)),
                   lambda b, d: (torch.randn(b, 4, 40, 40, device=d),), ["latent"], [0], "mse",
                   [4, 16], [8]),
    "deeplab_mnv3_g": (P(deeplab, classes=19),
                       lambda b, d: (torch.randn(b, 3, 288, 576, device=d),), ["image"], [0],
                       "pixels", [4, 16], [8]),
    "t5_encdec_g": (P(t5, vocab=14000, d_model=448, d_ff=1792, layers=3, heads=7),
                    lambda b, d: (torch.randint(0, 14000, (b, 512), device=d),
                                  torch.randint(0, 14000, (b, 128), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [4, 16], [8]),
    "llama_gqa_g": (P(llama, vocab=20000, hidden=768, ffn=2048, layers=3, heads=12, kv_heads=3),
                    tokens(20000, 1536), ["input_ids"], [0], "tokens", [1, 4], [2]),
    "qwen_bigvocab_g": (P(qwen, hidden=576, ffn=1536, layers=2, heads=9, kv_heads=3),
                        tokens(151936, 1536), ["input_ids"], [0], "tokens", [1, 3], [2]),
    "wav2vec2_cls_g": (P(wav2vec2, hidden=384, layers=4, heads=6, ffn=1536),
                       lambda b, d: (torch.randn(b, 24000, device=d),), ["input_values"], [0],
                       "cls", [6, 20], [8]),
    "wav2vec2_ln_g": (P(wav2vec2_ln, hidden=256, layers=3, heads=4, ffn=1024, conv_dim=(384,) * 7),
                      lambda b, d: (torch.randn(b, 28000, device=d),), ["input_values"], [0],
                      "cls", [6, 24], [8]),
})
CHECK7_MODELS = [n for n in MODELS if n.endswith("_g")]


# An eighth held-out round (`_h`, check only, never evidence), built on the
# main of 2026-12-06 (third session) after the TensorIterator layout and
# patch split-K rules: an MLP-Mixer on 192x192 images with 384 channels, a
# ViT-S/16-style classifier at 224x224, a 2-layer LSTM language model at
# sequence 128, a 3-level U-Net with 128/256/384 channels on 32x32 latents,
# DeepLabV3 (ResNet-50) at 256x320, a T5 with a 384-token encoder and a
# 256-token decoder, a LLaMA with 10 query and 2 key-value heads at sequence
# 1024, ConvNeXt with 64-512 channels at 160x160 and a ResNeXt with 32 groups
# at 176x176.
MODELS.update({
    "mixer_h": (P(Mixer, image=192, patch=16, d=384, depth=6, token_mlp=192, channel_mlp=1536,
                  classes=100), image(192), ["image"], [0], "cls", [24, 128], [64]),
    "vit_s_h": (P(ImageTower, image=224, patch=16, d=384, layers=4, heads=6, embed=100),
                image(224), ["image"], [0], "cls", [32, 128], [64]),
    "lstm_lm_h": (P(LstmLM, vocab=16000, emb=384, hidden=768, layers=2), tokens(16000, 128),
                  ["tokens"], [0], "tokens", [16, 64], [16]),
    "unet_ldm_h": (P(UNet, cin=4, ch=(128, 256, 384)),
                   lambda b, d: (torch.randn(b, 4, 32, 32, device=d),), ["latent"], [0], "mse",
                   [4, 16], [8]),
    "deeplab_r50_h": (P(deeplab, arch="deeplabv3_resnet50", classes=8),
                      lambda b, d: (torch.randn(b, 3, 256, 320, device=d),), ["image"], [0],
                      "pixels", [2, 8], [4]),
    "t5_encdec_h": (P(t5, vocab=12000, d_model=384, d_ff=1536, layers=2, heads=6),
                    lambda b, d: (torch.randint(0, 12000, (b, 384), device=d),
                                  torch.randint(0, 12000, (b, 256), device=d)),
                    ["input_ids", "decoder_input_ids"], [0, 0], "tokens", [4, 16], [8]),
    "llama_gqa_h": (P(llama, vocab=24000, hidden=640, ffn=1728, layers=2, heads=10, kv_heads=2),
                    tokens(24000, 1024), ["input_ids"], [0], "tokens", [2, 6], [2]),
    "convnext_h": (P(convnext, dims=(64, 128, 256, 512), depths=(2, 2, 2, 2)), image(160),
                   ["image"], [0], "cls", [32, 96], [64]),
    "resnext_h": (P(resnext, layers=(2, 2, 2, 2), groups=32, width=4), image(176), ["image"],
                  [0], "cls", [24, 96], [64]),
})
CHECK8_MODELS = [n for n in MODELS if n.endswith("_h")]


def loss_of(out, kind):
    if kind == "cls":
        return F.cross_entropy(out, torch.randint(0, out.shape[1], out.shape[:1], device=out.device))
    if kind == "tokens":
        v = out.shape[-1]
        y = torch.randint(0, v, out.shape[:-1], device=out.device)
        return F.cross_entropy(out.reshape(-1, v), y.reshape(-1))
    if kind == "pixels":
        y = torch.randint(0, out.shape[1], (out.shape[0],) + tuple(out.shape[2:]), device=out.device)
        return F.cross_entropy(out, y)
    return F.mse_loss(out, torch.randn_like(out))


# ---------------------------------------------------------------- export


def export(name, outdir):
    import onnx
    os.makedirs(outdir, exist_ok=True)
    build, inputs, names, axes, *_ = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    xs = inputs(2, "cpu")
    tmp = f"/tmp/{name}.full.onnx"
    rec = dict(model=name)
    t0 = time.time()
    try:
        batch = torch.export.Dim("batch", min=1, max=4096)
        torch.onnx.export(model, xs, tmp, dynamo=True, optimize=False, input_names=names,
                          output_names=["output"],
                          dynamic_shapes=tuple({a: batch} for a in axes), external_data=True)
        rec["exporter"] = "dynamo"
    except Exception as e:  # noqa: BLE001 - the README's fallback
        rec["dynamo_error"] = repr(e)[:400]
        torch.onnx.export(model, xs, tmp, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=names, output_names=["output"],
                          dynamic_axes={n: {a: "batch"} for n, a in zip(names, axes)})
        rec["exporter"] = "torchscript"
    m = onnx.load(tmp)
    out = os.path.join(outdir, f"{name}_train.onnx")
    onnx.save_model(m, out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=f"{name}_train.onnx.data", size_threshold=1024)
    if os.path.exists(out + ".data"):
        os.remove(out + ".data")
    rec.update(nodes=len(m.graph.node), onnx_bytes=os.path.getsize(out),
               params=sum(p.numel() for p in model.parameters() if p.requires_grad),
               buffers=sum(b.numel() for b in model.buffers()), seconds=round(time.time() - t0, 1))
    print(json.dumps(rec), flush=True)


# ---------------------------------------------------------------- measure


def frame_summary(frames):
    """The innermost frames that name a module, a model file or a torch function."""
    keep = []
    for f in frames:
        fn = f.get("filename", "")
        if any(s in fn for s in ("torch/nn", "torchvision", "transformers", "torch/optim",
                                  "torch/autograd", "torch/_tensor", "torch/functional",
                                  "families.py")):
            keep.append(f"{fn.split('/')[-1]}:{f.get('line')}:{f.get('name')}")
        if len(keep) >= 4:
            break
    return "|".join(keep)


def infer_peaks(model, xs):
    """eval(), two forwards under inference_mode: the peaks they reach."""
    total = torch.cuda.mem_get_info()[1]
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        for _ in range(2):
            out = model(*xs)
            del out
    torch.cuda.synchronize()
    return dict(peak=torch.cuda.max_memory_allocated(),
                reserved_peak=torch.cuda.max_memory_reserved(),
                device_used=total - torch.cuda.mem_get_info()[0])


def measure(name, mode, batch, prec, trace=None):
    build, inputs, _, _, loss_kind, *_ = MODELS[name]
    torch.manual_seed(0)
    if trace:
        torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
    # bf16 only: how the weights reach the GPU (memplan's --model-load):
    # cast (the default: .cuda(), then .to(bfloat16) there), cast-empty-cache
    # (the same, then torch.cuda.empty_cache()), direct (.to("cuda",
    # bfloat16): a blocking copy converts on the CPU).
    load = os.environ.get("FAMILIES_LOAD", "")
    if prec == "bf16" and load == "direct":
        model = build().to("cuda", torch.bfloat16)
    else:
        model = build().cuda()
    xs = inputs(batch, "cuda")
    if prec == "bf16":
        if load != "direct":
            model = model.to(torch.bfloat16)
        if load == "cast-empty-cache":
            torch.cuda.empty_cache()
        xs = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in xs)
    rec = dict(model=name, mode=mode, batch=batch, precision=prec,
               params=sum(p.numel() for p in model.parameters() if p.requires_grad),
               param_bytes=torch.cuda.memory_allocated())
    if load and prec == "bf16":
        rec["load"] = load
    total = torch.cuda.mem_get_info()[1]
    if mode == "infer":
        rec.update(infer_peaks(model, xs))
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        amp = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(prec)
        scaler = torch.amp.GradScaler("cuda") if prec == "amp_fp16" else None
        steps = []
        for _ in range(3):
            torch.cuda.reset_peak_memory_stats()
            with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
                out = model(*xs)
                loss = loss_of(out, loss_kind)
            fwd = torch.cuda.max_memory_allocated()
            (scaler.scale(loss) if scaler else loss).backward()
            bwd = torch.cuda.max_memory_allocated()
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
            del out, loss
            torch.cuda.synchronize()
            steps.append(dict(fwd_peak=fwd, fwd_bwd_peak=bwd,
                              step_peak=torch.cuda.max_memory_allocated(),
                              reserved_peak=torch.cuda.max_memory_reserved(),
                              after=torch.cuda.memory_allocated(),
                              device_used=total - torch.cuda.mem_get_info()[0]))
        rec["steps"] = steps
    print(json.dumps(rec), flush=True)
    if trace:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        events = [[e["action"], e["addr"], e["size"], frame_summary(e.get("frames", []))]
                  for e in snap["device_traces"][0]
                  if e["action"] in ("alloc", "free_completed", "segment_alloc", "segment_free")]
        rec["events"] = events
        with open(trace, "w") as f:
            json.dump(rec, f)


if __name__ == "__main__":
    verb = sys.argv[1]
    if verb in ("list", "list-check", "list-new", "list-new2", "list-check3", "list-check4",
                "list-check5", "list-check6", "list-check7", "list-check8"):
        for n, spec in MODELS.items():
            group = ("list-check" if n in CHECK_MODELS else "list-new2" if n in NEW2_MODELS else
                     "list-new" if n in NEW_MODELS else "list-check3" if n in CHECK3_MODELS else
                     "list-check4" if n in CHECK4_MODELS else
                     "list-check5" if n in CHECK5_MODELS else
                     "list-check6" if n in CHECK6_MODELS else
                     "list-check7" if n in CHECK7_MODELS else
                     "list-check8" if n in CHECK8_MODELS else "list")
            if group != verb:
                continue
            print(n, " ".join(map(str, spec[5])), "|", " ".join(map(str, spec[6])))
    elif verb == "export":
        export(sys.argv[2], sys.argv[3])
    else:
        name, mode, batch, prec = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        try:
            measure(name, mode, batch, prec, sys.argv[6] if verb == "trace" else None)
        except torch.cuda.OutOfMemoryError as e:
            print(json.dumps(dict(model=name, mode=mode, batch=batch, precision=prec,
                                  error="oom: " + str(e)[:1000],
                                  allocated=torch.cuda.memory_allocated(),
                                  reserved=torch.cuda.memory_reserved(),
                                  max_allocated=torch.cuda.max_memory_allocated())), flush=True)
