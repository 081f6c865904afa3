"""Models through backend="kiln", wider than the zoo (tests/python/zoo/):
every torchvision classification model; 30 timm models across the families
issue 7 names (ViT, DeiT, ConvNeXt, EfficientNet, RegNet, Swin, MobileNetV3:
their variants with RoPE, registers, RMSNorm, GRN, group norm, CondConv,
EvoNorm); 14 transformers architectures beyond the zoo's (small configs); or
14 transformers decoders decoding with a KV cache (`decoders`: a 5-token
prompt, then 9 teacher-forced steps of one token through DynamicCache, so
Dynamo's graphs become symbolic and kiln specializes them per length).
One JSON line per model: the difference from eager, the output's scale, what
fell back, how its graphs were captured. For docs/models.md.

    python bench/model_sweep.py torchvision|timm|transformers|decoders [--device cpu] [--dtype f32|f16|bf16]
                                [--skip a,b] [--out f.jsonl]

Random weights; images batch 1 at 64x64 unless a model needs its own size;
text batch 2 of 16 tokens. A model that fails to build or compile is recorded
with its error and the sweep goes on."""

from __future__ import annotations

import argparse
import functools
import json
import time

import torch

from kiln.dynamo_backend import kiln_backend

# timm models and their input side (ViT-style models get img_size=side).
TIMM = {
    "vit_tiny_patch16_224": 64, "vit_small_patch16_224": 64, "vit_base_patch16_rope_224": 64,
    "vit_base_patch16_siglip_224": 64, "vit_small_patch14_reg4_dinov2": 70, "vit_base_patch16_clip_quickgelu_224": 64,
    "vit_small_patch16_dinov3": 64, "deit_tiny_patch16_224": 64, "deit_tiny_distilled_patch16_224": 64,
    "convnext_atto": 64, "convnext_atto_rms": 64, "convnextv2_atto": 64, "convnext_zepto_rms": 64,
    "efficientnet_b0": 64, "efficientnet_b0_gn": 64, "efficientnet_lite0": 64, "efficientnetv2_rw_t": 64,
    "efficientnet_cc_b0_4e": 64, "efficientnet_b0_g16_evos": 64, "regnetx_002": 64, "regnety_002": 64,
    "regnetz_005": 64, "regnetv_040": 64, "swin_tiny_patch4_window7_224": 224, "swinv2_tiny_window8_256": 256,
    "swinv2_cr_tiny_224": 224, "swin_s3_tiny_224": 224, "mobilenetv3_small_050": 64, "mobilenetv3_rw": 64,
    "mobilenetv3_large_150d": 64,
}


def _text_configs() -> dict:
    """transformers architecture -> (model class, config): 2 layers, hidden size 64, 4 heads."""
    import transformers as t

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=128,
                 max_position_embeddings=64)
    gqa = dict(small, num_key_value_heads=2, head_dim=16)
    return {
        "gemma": (t.GemmaModel, t.GemmaConfig(**gqa)),
        "gemma2": (t.Gemma2Model, t.Gemma2Config(**gqa)),
        "phi3": (t.Phi3Model, t.Phi3Config(**dict(small, num_key_value_heads=2, pad_token_id=0))),
        "phi": (t.PhiModel, t.PhiConfig(**small)),
        "opt": (t.OPTModel, t.OPTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                                        vocab_size=128, max_position_embeddings=64, word_embed_proj_dim=64)),
        "gpt_neox": (t.GPTNeoXModel, t.GPTNeoXConfig(**small)),
        "falcon": (t.FalconModel, t.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                 vocab_size=128)),
        "electra": (t.ElectraModel, t.ElectraConfig(**dict(small, embedding_size=32))),
        "clip_text": (t.CLIPTextModel, t.CLIPTextConfig(**small)),
        "qwen3": (t.Qwen3Model, t.Qwen3Config(**gqa)),
        "mpnet": (t.MPNetModel, t.MPNetConfig(**small)),
        "xlm_roberta": (t.XLMRobertaModel, t.XLMRobertaConfig(**small)),
        "bart_encoder": (lambda cfg: t.BartModel(cfg).get_encoder(),
                         t.BartConfig(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                      decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                      vocab_size=128, max_position_embeddings=64)),
        "vit_hf": (t.ViTModel, t.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=128, image_size=32, patch_size=8)),
    }


def build_transformers(name: str):
    """The model and its input (token ids, or an image for vit_hf); outputs compare by last_hidden_state."""
    model_class, config = _text_configs()[name]
    x = torch.randn(1, 3, 32, 32) if name == "vit_hf" else torch.randint(1, 128, (2, 16))
    return model_class(config).eval(), x


def _decoder_configs() -> dict:
    """Causal LM name -> a function building it: 2 layers, hidden size 64, 4 heads (2 key/value heads
    where the architecture groups them)."""
    import transformers as t

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=128,
                 max_position_embeddings=64)
    gqa = dict(small, num_key_value_heads=2, head_dim=16)
    gpt = dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    return {
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(**gqa)),
        "mistral": lambda: t.MistralForCausalLM(t.MistralConfig(**gqa)),
        "qwen2": lambda: t.Qwen2ForCausalLM(t.Qwen2Config(**gqa)),
        "qwen3": lambda: t.Qwen3ForCausalLM(t.Qwen3Config(**gqa)),
        "gemma": lambda: t.GemmaForCausalLM(t.GemmaConfig(**gqa)),
        "gemma2": lambda: t.Gemma2ForCausalLM(t.Gemma2Config(**gqa)),
        "phi3": lambda: t.Phi3ForCausalLM(t.Phi3Config(**dict(small, num_key_value_heads=2, pad_token_id=0))),
        "phi": lambda: t.PhiForCausalLM(t.PhiConfig(**small)),
        "opt": lambda: t.OPTForCausalLM(t.OPTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                    ffn_dim=128, vocab_size=128, max_position_embeddings=64,
                                                    word_embed_proj_dim=64)),
        "gpt_neox": lambda: t.GPTNeoXForCausalLM(t.GPTNeoXConfig(**small)),
        "falcon": lambda: t.FalconForCausalLM(t.FalconConfig(hidden_size=64, num_hidden_layers=2,
                                                             num_attention_heads=4, vocab_size=128)),
        "gpt2": lambda: t.GPT2LMHeadModel(t.GPT2Config(**gpt)),
        "bloom": lambda: t.BloomForCausalLM(t.BloomConfig(vocab_size=128, hidden_size=64, n_layer=2, n_head=4)),
        "gptj": lambda: t.GPTJForCausalLM(t.GPTJConfig(**gpt, rotary_dim=8)),
    }


def decode(model, tokens: torch.Tensor, prompt: int = 5) -> torch.Tensor:
    """Teacher-forced decoding: the prompt, then one token a step through a DynamicCache; every step's
    logits, concatenated along the sequence."""
    from transformers import DynamicCache

    cache, logits, step_in = DynamicCache(), [], tokens[:, :prompt]
    for step in range(prompt, tokens.shape[1] + 1):
        logits.append(model(step_in, past_key_values=cache, use_cache=True).logits)
        step_in = tokens[:, step:step + 1]
    return torch.cat(logits, dim=1)


def build_timm(name: str):
    import timm

    side = TIMM[name]
    kwargs = {"img_size": side} if name.startswith(("vit_", "deit_")) else {}
    return timm.create_model(name, pretrained=False, **kwargs).eval(), side


def build_torchvision(name: str):
    """The model and its input side."""
    import torchvision

    kwargs, side = {}, 64
    if name.startswith("vit_"):
        kwargs = {"image_size": 64}
    if name in ("inception_v3", "googlenet"):
        kwargs = {"aux_logits": False, "init_weights": False}
        side = 75 if name == "inception_v3" else side
    if name.startswith("maxvit"):
        side = 224
    return torchvision.models.get_model(name, weights=None, **kwargs).eval(), side


def names(source: str) -> list[str]:
    if source == "timm":
        return list(TIMM)
    if source == "transformers":
        return list(_text_configs())
    if source == "decoders":
        return list(_decoder_configs())
    import torchvision

    return torchvision.models.list_models(module=torchvision.models)


DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def sweep_one(source: str, name: str, device: str, dtype: torch.dtype = torch.float32) -> dict:
    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        if source == "transformers":
            model, x = build_transformers(name)
        elif source == "decoders":
            model, x = _decoder_configs()[name]().eval(), torch.randint(1, 128, (2, 14))
        else:
            model, side = (build_timm if source == "timm" else build_torchvision)(name)
            x = torch.randn(1, 3, side, side)
        model = model.to(device, dtype)
        x = x.to(device, dtype) if x.is_floating_point() else x.to(device)
        reports = []
        compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
        run = functools.partial(decode, tokens=x) if source == "decoders" else lambda m: m(x)
        with torch.no_grad():
            want = run(model)
            start = time.perf_counter()
            got = run(compiled)
            seconds = time.perf_counter() - start
        if source == "transformers":
            want, got = want.last_hidden_state, got.last_hidden_state
        fallbacks = {}
        for report in reports:
            for d in report.fallbacks:
                fallbacks.setdefault(d.target, d.reason)
        return {"name": name, "dtype": str(dtype).removeprefix("torch."),
                "diff": (got.float() - want.float()).abs().max().item(), "scale": want.float().abs().max().item(),
                "fallbacks": fallbacks, "seconds": round(seconds, 1),
                "captures": sorted({report.capture for report in reports})}
    except Exception as e:  # noqa: BLE001 - one model's failure is a result, not the end of the sweep
        return {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", choices=["torchvision", "timm", "transformers", "decoders"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=list(DTYPES), default="f32")
    parser.add_argument("--skip", default="", help="comma-separated model names to leave out")
    parser.add_argument("--out", default="model_sweep.jsonl")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with open(args.out, "a") as out:
        for name in names(args.source):
            if name in skip:
                continue
            record = sweep_one(args.source, name, args.device, DTYPES[args.dtype])
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(name, record.get("error") or (f"{record['diff']:.3g} of {record['scale']:.3g}",
                                               sorted(record["fallbacks"])), flush=True)


if __name__ == "__main__":
    main()
