"""transformers models with tiny configs and random weights (2 layers,
hidden size 64, 4 heads, a 128-token vocabulary): the encoders, GPT-2, T5's
encoder and decoder, Whisper's encoder and LLaMA-style decoders (RMSNorm,
rotary embeddings, SiLU-gated MLP, grouped-query attention, causal masks).
Each model is wrapped so it returns one tensor. `full=True` gives
realistic sizes for the GPU run (bench/zoo_gpu.py)."""

from __future__ import annotations

import torch

VOCAB = 128


class _FirstTensor(torch.nn.Module):
    """Calls the model with keyword inputs and returns its first output tensor."""

    def __init__(self, model, field: str):
        super().__init__()
        self.model = model
        self.field = field

    def forward(self, *args):
        return getattr(self.model(*args, return_dict=True), self.field)


def _sizes(full: bool) -> dict:
    if full:
        return dict(hidden=768, layers=4, heads=12, kv_heads=4, inter=3072, seq=128)
    return dict(hidden=64, layers=2, heads=4, kv_heads=2, inter=128, seq=16)


def _bert_like(name: str, s: dict, attn: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                  num_attention_heads=s["heads"], intermediate_size=s["inter"], max_position_embeddings=512,
                  attn_implementation=attn)
    if name == "bert":
        return tf.BertModel(tf.BertConfig(**common))
    if name == "roberta":
        return tf.RobertaModel(tf.RobertaConfig(**common, pad_token_id=1))
    if name == "albert":
        return tf.AlbertModel(tf.AlbertConfig(**common, embedding_size=32))
    if name == "distilbert":
        return tf.DistilBertModel(tf.DistilBertConfig(vocab_size=VOCAB, dim=s["hidden"], n_layers=s["layers"],
                                                      n_heads=s["heads"], hidden_dim=s["inter"],
                                                      attn_implementation=attn))
    raise KeyError(name)


def _decoder(name: str, s: dict, attn: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                  num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], intermediate_size=s["inter"],
                  max_position_embeddings=512, attn_implementation=attn)
    configs = {"llama": tf.LlamaConfig, "mistral": tf.MistralConfig, "qwen2": tf.Qwen2Config}
    classes = {"llama": tf.LlamaModel, "mistral": tf.MistralModel, "qwen2": tf.Qwen2Model}
    config = configs[name](**common)
    config.use_cache = False
    return classes[name](config)


def build(name: str, batch: int = 1, full: bool = False, seed: int = 0):
    """(wrapped model in eval mode, inputs) for zoo model `name`."""
    import transformers as tf

    torch.manual_seed(seed)
    s = _sizes(full)
    base, _, attn = name.partition("@")
    attn = attn or "sdpa"
    ids = torch.randint(3, VOCAB, (batch, s["seq"]))
    if base in ("bert", "roberta", "albert", "distilbert"):
        return _FirstTensor(_bert_like(base, s, attn), "last_hidden_state").eval(), (ids,)
    if base in ("llama", "mistral", "qwen2"):
        return _FirstTensor(_decoder(base, s, attn), "last_hidden_state").eval(), (ids,)
    if base == "gpt2":
        config = tf.GPT2Config(vocab_size=VOCAB, n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
                               n_positions=512, attn_implementation=attn, use_cache=False)
        return _FirstTensor(tf.GPT2Model(config), "last_hidden_state").eval(), (ids,)
    if base in ("t5_encoder", "t5_decoder"):
        # transformers 4.57 has no SDPA path for T5: eager attention.
        config = tf.T5Config(vocab_size=VOCAB, d_model=s["hidden"], d_kv=s["hidden"] // s["heads"],
                             d_ff=s["inter"], num_layers=s["layers"], num_heads=s["heads"], use_cache=False,
                             attn_implementation="eager")
        if base == "t5_encoder":
            return _FirstTensor(tf.T5EncoderModel(config), "last_hidden_state").eval(), (ids,)
        decoder_ids = torch.randint(3, VOCAB, (batch, s["seq"] // 2))
        return _T5Decoder(tf.T5Model(config)).eval(), (ids, decoder_ids)
    if base == "whisper_encoder":
        config = tf.WhisperConfig(vocab_size=VOCAB, d_model=s["hidden"], encoder_layers=s["layers"],
                                  encoder_attention_heads=s["heads"], decoder_layers=1, decoder_attention_heads=s["heads"],
                                  encoder_ffn_dim=s["inter"], decoder_ffn_dim=s["inter"], num_mel_bins=16 if not full else 80,
                                  max_source_positions=s["seq"] if not full else 1500, attn_implementation=attn,
                                  pad_token_id=1, bos_token_id=2, eos_token_id=2, decoder_start_token_id=2)
        frames = 2 * config.max_source_positions
        features = torch.randn(batch, config.num_mel_bins, frames)
        return _FirstTensor(tf.WhisperModel(config).get_encoder(), "last_hidden_state").eval(), (features,)
    raise KeyError(name)


class _T5Decoder(torch.nn.Module):
    """T5 encoder-decoder: the decoder's last hidden state (cross-attention to the encoder)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids, return_dict=True).last_hidden_state


NAMES = ["bert", "roberta", "distilbert", "albert", "gpt2", "t5_encoder", "t5_decoder", "whisper_encoder",
         "llama", "mistral", "qwen2", "gpt2@eager", "llama@eager", "bert@eager"]
