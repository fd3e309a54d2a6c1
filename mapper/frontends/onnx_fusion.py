"""Pattern fusion of exported ONNX graphs before import (onnxscript's pattern rewriter on onnx-ir).

Exporters decompose what NVDLA runs as one SDP pass. These rules put the pieces back:

* GELU, erf form  0.5 * x * (1 + erf(x / sqrt 2))                    -> Gelu(x)
* GELU, tanh form 0.5 * x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> Gelu(x, approximate="tanh")
* SiLU            x * sigmoid(x)                                      -> NvdlaSilu(x) (one LUT pass)
* RMSNorm         weight * (x * 1 / sqrt(mean(x^2) + eps))            -> NvdlaRmsNorm(x, weight)
* LayerNorm       ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div, scale, bias
                  -> LayerNormalization (onnxscript's rule for opset 18, ours for opset 17's axes attribute)

Commuted operand orders match too (RewriteRuleSet(commute=True)); constants must equal the formula's
to 1e-4 relative. The fused node keeps the shape of the value it replaces. `fuse` returns the count
of each pattern, which the report lists.
"""

from __future__ import annotations

import math
from typing import ClassVar

import onnx_ir as ir
from onnxscript.rewriter import pattern

NVDLA_DOMAIN = "nvdla"  # nodes only this importer reads (a fused SiLU)


def _near(value: ir.Value, want: float) -> bool:
    const = value.const_value
    if const is None:
        return False
    arr = const.numpy()
    return arr.size == 1 and math.isclose(float(arr.reshape(())), want, rel_tol=1e-4)


class _Rule(pattern.RewriteRuleClassBase):
    constants: ClassVar[dict[str, float]] = {}  # pattern argument -> the value it must hold

    def check(self, context, **kw) -> pattern.MatchResult:
        ok = pattern.MatchResult()
        for name, want in self.constants.items():
            if not _near(kw[name], want):
                return ok.fail(f"{name} is not {want}")
        return ok


class GeluErf(_Rule):
    constants: ClassVar[dict[str, float]] = {"root2": math.sqrt(2.0), "one": 1.0, "half": 0.5}

    def pattern(self, op, x, root2, one, half):
        return op.Mul(op.Mul(x, op.Add(op.Erf(op.Div(x, root2)), one)), half)

    def rewrite(self, op, x, **_):
        return op.Gelu(x)


class GeluErfHalfFirst(GeluErf):
    def pattern(self, op, x, root2, one, half):  # (0.5 x) (1 + erf(x / sqrt 2)), as HF's gelu writes it
        return op.Mul(op.Mul(x, half), op.Add(op.Erf(op.Div(x, root2)), one))


class GeluErfHalfInner(GeluErf):
    def pattern(self, op, x, root2, one, half):  # x (0.5 (1 + erf(x / sqrt 2))), as torch's decomposition writes it
        return op.Mul(x, op.Mul(half, op.Add(op.Erf(op.Div(x, root2)), one)))


class GeluTanh(_Rule):
    constants: ClassVar[dict[str, float]] = {
        "three": 3.0,
        "c": 0.044715,
        "k": math.sqrt(2.0 / math.pi),
        "one": 1.0,
        "half": 0.5,
    }

    def pattern(self, op, x, three, c, k, one, half):
        inner = op.Mul(k, op.Add(x, op.Mul(c, op.Pow(x, three))))
        return op.Mul(op.Mul(half, x), op.Add(one, op.Tanh(inner)))

    def rewrite(self, op, x, **_):
        return op.Gelu(x, approximate="tanh")


class GeluTanhHalfLast(GeluTanh):
    def pattern(self, op, x, three, c, k, one, half):
        inner = op.Mul(k, op.Add(x, op.Mul(c, op.Pow(x, three))))
        return op.Mul(op.Mul(x, op.Add(one, op.Tanh(inner))), half)


class Silu(_Rule):
    def pattern(self, op, x):
        return op.Mul(x, op.Sigmoid(x))

    def rewrite(self, op, x):
        return op.NvdlaSilu(x, _domain=NVDLA_DOMAIN)


class LayerNormAxesAttribute(_Rule):
    """The opset-17 form (ReduceMean's axes as an attribute: the TorchScript exporter's), which
    onnxscript's own LayerNorm rule (axes as an input, opset 18) leaves."""

    constants: ClassVar[dict[str, float]] = {"two": 2.0}

    def pattern(self, op, x, two, epsilon, scale, bias):
        dev = op.Sub(x, op.ReduceMean(x, axes=[-1]))
        var = op.ReduceMean(op.Pow(dev, two), axes=[-1])
        return op.Add(op.Mul(op.Div(dev, op.Sqrt(op.Add(var, epsilon))), scale), bias)

    def check(self, context, **kw) -> pattern.MatchResult:
        ok = super().check(context, **kw)
        eps = kw["epsilon"].const_value
        if ok and (eps is None or eps.numpy().size != 1):
            return ok.fail("epsilon is not a scalar constant")
        return ok

    def rewrite(self, op, x, epsilon, scale, bias, **_):
        return op.LayerNormalization(x, scale, bias, axis=-1, epsilon=float(epsilon.const_value.numpy().reshape(())))


class RmsNorm(_Rule):
    """x * rsqrt(mean(x^2) + eps) * weight, the way LLaMA-family exports write it (opset 17/18)."""

    constants: ClassVar[dict[str, float]] = {"two": 2.0}

    def pattern(self, op, x, two, epsilon, weight):
        ms = op.ReduceMean(op.Pow(x, two), _allow_other_inputs=True, _allow_other_attributes=True)
        return op.Mul(weight, op.Mul(x, op.Reciprocal(op.Sqrt(op.Add(ms, epsilon)))))

    def rewrite(self, op, x, weight, **_):
        return op.NvdlaRmsNorm(x, weight, _domain=NVDLA_DOMAIN)


class RmsNormDiv(RmsNorm):
    """The same with 1 / sqrt(.) written as a Div (the TorchScript exporter's torch.rsqrt)."""

    constants: ClassVar[dict[str, float]] = {"two": 2.0, "one": 1.0}

    def pattern(self, op, x, two, epsilon, weight, one):
        ms = op.ReduceMean(op.Pow(x, two), _allow_other_inputs=True, _allow_other_attributes=True)
        return op.Mul(weight, op.Mul(x, op.Div(one, op.Sqrt(op.Add(ms, epsilon)))))


RULES = {
    "gelu_erf": pattern.RewriteRuleSet(
        [GeluErf.rule(), GeluErfHalfFirst.rule(), GeluErfHalfInner.rule()], commute=True
    ),
    "gelu_tanh": pattern.RewriteRuleSet([GeluTanh.rule(), GeluTanhHalfLast.rule()], commute=True),
    "silu": pattern.RewriteRuleSet([Silu.rule()], commute=True),
    "layernorm_opset17": pattern.RewriteRuleSet([LayerNormAxesAttribute.rule()], commute=True),
    "rmsnorm": pattern.RewriteRuleSet([RmsNorm.rule(), RmsNormDiv.rule()], commute=True),
}


def fuse(model: ir.Model) -> dict[str, int]:
    """Apply every rule set to the model in place; pattern name -> fusions applied."""
    from onnxscript.rewriter.rules.fusion import _layer_norm  # onnxscript's own LayerNorm fusion

    counts = {name: rules.apply_to_model(model) for name, rules in RULES.items()}
    counts["layernorm"] = counts.pop("layernorm_opset17") + _layer_norm.fuse_layer_normalization(model)
    if counts["silu"] or counts["rmsnorm"]:
        model.opset_imports.setdefault(NVDLA_DOMAIN, 1)
    return {k: v for k, v in counts.items() if v}
