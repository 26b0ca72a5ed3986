"""The estimated peak against storages followed through the model's own eager call.

Run: ``python benchmarks/eager_memory.py [--train] [model ...]``. For each model (batch
2, eval mode): ``analyze``'s estimated peak, and the peak of the same storage tracker
run over the model's own call (no fxinspect program: the frames, lists and locals the
model really keeps), under ``torch.no_grad()`` or, with ``--train``, a whole forward and
backward of the outputs' sum. Both count tensors and the kernels' scratch, probed the
same way (``fxinspect.run.memory.scratch``): the lifetimes are what differs;
transformers models are called with ``use_cache=False``, as ``analyze`` calls them.
Model names: torchvision's, ``timm:<name>``, ``hf:gpt2|bert|llama|t5``.
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision

import fxinspect
from fxinspect.run.memory.scratch import Scratch
from fxinspect.run.memory.storages import StorageTracker
from fxinspect.tensors import tensors_in

MODELS = (
    "resnet50 vit_b_16 mobilenet_v2 efficientnet_b0 densenet121 convnext_tiny swin_t regnet_y_400mf "
    "squeezenet1_0 googlenet shufflenet_v2_x1_0 mnasnet0_5 inception_v3 deeplabv3_mobilenet_v3_large "
    "fcn_resnet50 lraspp_mobilenet_v3_large maxvit_t efficientnet_v2_s hf:gpt2 hf:bert hf:llama hf:t5 "
    "timm:resnet18d timm:efficientnet_b0 timm:dpn68 timm:hrnet_w18_small timm:mixer_s16_224 "
    "timm:cspdarknet53 timm:res2net50_26w_4s timm:ghostnet_100"
).split()


def build(name: str) -> tuple[torch.nn.Module, dict | torch.Tensor]:
    """A model with random weights and its example input (a tensor, or keyword inputs)."""
    if name.startswith("hf:"):
        import transformers as T

        config, cls = {
            "gpt2": (lambda: T.GPT2Config(n_layer=2), T.GPT2LMHeadModel),
            "bert": (lambda: T.BertConfig(num_hidden_layers=2), T.BertModel),
            "llama": (
                lambda: T.LlamaConfig(
                    num_hidden_layers=2,
                    hidden_size=256,
                    intermediate_size=512,
                    num_attention_heads=4,
                    num_key_value_heads=2,
                    vocab_size=1000,
                ),
                T.LlamaForCausalLM,
            ),
            "t5": (
                lambda: T.T5Config(num_layers=2, d_model=256, d_ff=512, num_heads=4, vocab_size=1000),
                T.T5EncoderModel,
            ),
        }[name[3:]]
        return cls(config()), {"input_ids": torch.randint(0, 1000, (2, 64)), "use_cache": False}
    image = torch.randn(2, 3, 224, 224)
    if name.startswith("timm:"):
        import timm

        return timm.create_model(name[5:], pretrained=False), image
    extra = {"weights_backbone": None} if name.startswith(("deeplab", "fcn", "lraspp")) else {}
    return torchvision.models.get_model(name, weights=None, **extra), image


def eager_peak(model: torch.nn.Module, x: dict | torch.Tensor, train: bool) -> int:
    """The peak of the storages the model's own call allocates (and with ``train`` its
    backward of the outputs' sum, every ``.grad`` from ``None``)."""
    args, kwargs = ((), x) if isinstance(x, dict) else ((x,), {})
    inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
    tracker = StorageTracker([*model.parameters(), *model.buffers(), *inputs], Scratch())
    if not train:
        with torch.no_grad(), tracker:
            model(*args, **kwargs)
        tracker.settle()
        return tracker.peak
    for p in model.parameters():
        p.grad = None
    with tracker, torch.autograd.graph.saved_tensors_hooks(tracker.pack, tracker.unpack):
        out = model(*args, **kwargs)
        loss = sum(t.float().sum() for t in tensors_in(out) if t.is_floating_point())
        loss.backward()
        del loss, out
    for p in model.parameters():
        p.grad = None
    tracker.settle()
    return tracker.peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--train", action="store_true", help="a forward and backward, not a no_grad forward")
    args = parser.parse_args()
    for name in args.models:
        torch.manual_seed(0)
        model, x = build(name)
        model.eval()
        start = time.perf_counter()
        if args.train:
            report = fxinspect.analyze(model, x, timing=False, backward=True)
        else:
            with torch.no_grad():
                report = fxinspect.analyze(model, x, timing=False)
        truth = eager_peak(model, x, args.train)
        m = report.memory
        print(
            f"{name:28} {report.capture.method:9} estimate {m.peak:>13,}  eager {truth:>13,}  "
            f"{m.peak / truth - 1:+7.2%}  at {m.peak_node}  {time.perf_counter() - start:.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
