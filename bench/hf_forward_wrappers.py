#!/usr/bin/env python3
"""Which Python wrappers the installed transformers puts around a model's
forward, and what a training forward keeps alive until it returns.

  python3 bench/hf_forward_wrappers.py

For the family and calibration models that run Hugging Face code
(wav2vec2_cls, bert_base, t5_encdec), prints the transformers version, the
chain of decorators around each forward (file:line of every function whose
__wrapped__ leads to the model's own forward), and, for a small CPU training
forward of each, the tensors the returned output object still references
(hidden_states, extract_features, ...), by field and shape. The H200 trace of
wav2vec2_cls b512 amp_bf16 frees every encoder layer's output and the feature
projection's LayerNorm output together when the model returns (frames
backbone_utils.py:172/175, wrapper); this names the mechanism. No GPU needed.
"""
import inspect

import torch
import transformers as T


def chain(fn):
    out = []
    while fn is not None:
        try:
            src = inspect.getsourcefile(fn)
            line = inspect.getsourcelines(fn)[1]
        except (TypeError, OSError):
            src, line = "?", 0
        out.append(f"{getattr(fn, '__qualname__', fn)} ({src.split('site-packages/')[-1]}:{line})")
        fn = getattr(fn, "__wrapped__", None)
    return out


def kept(output):
    fields = []
    items = output.items() if hasattr(output, "items") else enumerate(output)
    for k, v in items:
        if torch.is_tensor(v):
            fields.append(f"{k} {tuple(v.shape)}")
        elif isinstance(v, (tuple, list)):
            fields.append(f"{k} tuple of {len(v)}: "
                          + ", ".join(str(tuple(t.shape)) for t in v if torch.is_tensor(t)))
    return fields


def main():
    print("transformers", T.__version__, "torch", torch.__version__)
    w2v = T.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=128, num_labels=10, feat_extract_norm="group",
                           mask_time_prob=0.0, mask_feature_prob=0.0, layerdrop=0.0)
    w2v._attn_implementation = "sdpa"
    bert = T.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, num_labels=2)
    bert._attn_implementation = "sdpa"
    t5 = T.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                    num_decoder_layers=2, num_heads=4, use_cache=False)
    cases = [
        (T.Wav2Vec2ForSequenceClassification(w2v), T.Wav2Vec2Model,
         dict(input_values=torch.randn(2, 4000))),
        (T.BertForSequenceClassification(bert), T.BertModel,
         dict(input_ids=torch.randint(0, 100, (2, 16)))),
        (T.T5ForConditionalGeneration(t5), T.T5Stack,
         dict(input_ids=torch.randint(0, 100, (2, 16)),
              decoder_input_ids=torch.randint(0, 100, (2, 16)))),
    ]
    for model, inner, inputs in cases:
        name = type(model).__name__
        print(f"\n{name}.forward:")
        for c in chain(type(model).forward):
            print("  ", c)
        print(f"{inner.__name__}.forward:")
        for c in chain(inner.forward):
            print("  ", c)
        model.train()
        try:
            out = model(**inputs)
            print(f"{name} training output keeps:", "; ".join(kept(out)))
            base = getattr(model, model.base_model_prefix, None)
            if base is not None and name != "T5ForConditionalGeneration":
                out = base(**inputs)
                print(f"{type(base).__name__} training output keeps:", "; ".join(kept(out)))
        except Exception as e:  # noqa: BLE001 - report and go on with the next model
            print(f"{name}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
