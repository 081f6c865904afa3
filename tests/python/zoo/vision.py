"""torchvision and timm classification models with random weights, at small
image sizes (the smallest each architecture accepts, or close to it) and 10
classes, so the zoo runs on 2 CPU cores in CI. `full=True` gives the
ImageNet-sized versions for the GPU run (bench/zoo_gpu.py)."""

from __future__ import annotations

import torch

# name -> (builder name, keyword arguments, image side at reduced size)
TORCHVISION = {
    "tv_resnet18": ("resnet18", {}, 32),
    "tv_resnet50": ("resnet50", {}, 32),
    "tv_resnext50_32x4d": ("resnext50_32x4d", {}, 32),
    "tv_wide_resnet50_2": ("wide_resnet50_2", {}, 32),
    "tv_densenet121": ("densenet121", {}, 32),
    "tv_mobilenet_v2": ("mobilenet_v2", {}, 32),
    "tv_mobilenet_v3_small": ("mobilenet_v3_small", {}, 32),
    "tv_mobilenet_v3_large": ("mobilenet_v3_large", {}, 32),
    "tv_efficientnet_b0": ("efficientnet_b0", {}, 32),
    "tv_regnet_y_400mf": ("regnet_y_400mf", {}, 32),
    "tv_regnet_x_400mf": ("regnet_x_400mf", {}, 32),
    "tv_shufflenet_v2_x0_5": ("shufflenet_v2_x0_5", {}, 32),
    "tv_squeezenet1_1": ("squeezenet1_1", {}, 64),
    "tv_mnasnet0_5": ("mnasnet0_5", {}, 32),
    "tv_convnext_tiny": ("convnext_tiny", {}, 32),
    "tv_vit_b_16": ("vit_b_16", {"image_size": 32}, 32),
    "tv_swin_t": ("swin_t", {}, 64),
    "tv_maxvit_t": ("maxvit_t", {}, 64),  # reduced: maxvit_t's layers with 2x2 partitions (see _small_maxvit)
    "tv_googlenet": ("googlenet", {"aux_logits": False, "init_weights": False}, 32),
    "tv_inception_v3": ("inception_v3", {"aux_logits": False, "init_weights": False}, 75),
    "tv_alexnet": ("alexnet", {}, 64),
    "tv_vgg11": ("vgg11", {}, 32),
}

# name -> (timm model name, keyword arguments, image side at reduced size)
TIMM = {
    "timm_vit_tiny": ("vit_tiny_patch16_224", {"img_size": 32}, 32),
    "timm_deit_tiny": ("deit_tiny_distilled_patch16_224", {"img_size": 32}, 32),
    "timm_convnext_atto": ("convnext_atto", {}, 32),
    "timm_efficientnet_b0": ("efficientnet_b0", {}, 32),
    "timm_regnetx_002": ("regnetx_002", {}, 32),
    "timm_swin_tiny": ("swin_tiny_patch4_window7_224", {"img_size": 56, "window_size": 7}, 56),
    "timm_mobilenetv3_small": ("mobilenetv3_small_050", {}, 32),
}

FULL_SIDE = {"tv_inception_v3": 299, "tv_vit_b_16": 224, "timm_vit_tiny": 224, "timm_deit_tiny": 224,
             "timm_swin_tiny": 224, "tv_maxvit_t": 224}


def build(name: str, batch: int = 1, full: bool = False, seed: int = 0):
    """(model in eval mode, (input,)) for zoo model `name`."""
    torch.manual_seed(seed)
    if name in TORCHVISION:
        import torchvision

        builder, kwargs, side = TORCHVISION[name]
        kwargs = dict(kwargs)
        if full:
            kwargs.pop("image_size", None)
            kwargs.pop("input_size", None)
        if name == "tv_maxvit_t" and not full:
            model = _small_maxvit()
        else:
            model = getattr(torchvision.models, builder)(weights=None, num_classes=1000 if full else 10, **kwargs)
    else:
        import timm

        model_name, kwargs, side = TIMM[name]
        kwargs = {} if full else dict(kwargs)
        model = timm.create_model(model_name, pretrained=False, num_classes=1000 if full else 10, **kwargs)
    if full:
        side = FULL_SIDE.get(name, 224)
    _no_zero_weights(model)
    x = torch.randn(batch, 3, side, side)
    return model.eval(), (x,)


def _small_maxvit():
    """maxvit_t's configuration with 2x2 partitions, so a 64x64 image fits (maxvit_t's 7x7 needs 224)."""
    from torchvision.models.maxvit import MaxVit

    return MaxVit(input_size=(64, 64), stem_channels=64, partition_size=2, block_channels=[64, 128, 256, 512],
                  block_layers=[2, 2, 5, 2], head_dim=32, stochastic_depth_prob=0.2, num_classes=10)


def _no_zero_weights(model: torch.nn.Module) -> None:
    """Makes the output depend on every layer, so the comparison with eager means something:
    weights an architecture initializes to zero (ViT's head) get small random values, and the
    classifier's bias is zeroed (with random weights, several models' features are small next
    to it: GoogLeNet's output would be its bias alone)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0, 0.02)
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        if linears and linears[-1].bias is not None:
            linears[-1].bias.zero_()


NAMES = list(TORCHVISION) + list(TIMM)
