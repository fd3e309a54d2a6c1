"""What an accuracy run reports, typed: per-matmul errors of a transformer block, a trained model's task
accuracy, and the report a map, generate or serve run carries (`nvdla map --quantize`).

The runs themselves are nvdla_mapper.studies.accuracy; these types sit below the map's results
(results.MapResult holds an AccuracyReport) and become dicts only where a file is written (`to_dict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nvdla_mapper.numerics.quant import Calibration, Granularity
from nvdla_mapper.options import Pruning
from nvdla_sim.precision import Precision

# what the block's errors are measured against
REFERENCE = "float32 numpy, dense weights"
# the calibration data when the user gives none (studies.accuracy.calibration_inputs)
SEEDED_CALIBRATION = "seeded N(0,1) with outlier channels"


@dataclass(frozen=True)
class LayerError:
    """One matmul's output through the datapath against float32 at the same point of the block."""

    name: str
    max_abs: float
    rel: float  # ||q - ref|| / ||ref||
    cosine: float
    saturations: int

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "max_abs": self.max_abs,
            "rel": self.rel,
            "cosine": self.cosine,
            "saturations": self.saturations,
        }


@dataclass(frozen=True)
class TrainedAccuracy:
    """Task accuracy of a trained classifier, float and through NVDLA's INT8 datapath."""

    images: int
    float_correct: int
    nvdla_correct: int
    saturations: int

    @property
    def float_accuracy(self) -> float:
        return self.float_correct / self.images

    @property
    def nvdla_accuracy(self) -> float:
        return self.nvdla_correct / self.images

    def to_dict(self) -> dict[str, Any]:
        return {"images": self.images, "float_correct": self.float_correct, "nvdla_correct": self.nvdla_correct,
                "saturations": self.saturations}  # fmt: skip


@dataclass(frozen=True)
class LmAccuracy:
    """A trained language model's held-out accuracy, float and through NVDLA's INT8 datapath: per-position
    negative log-likelihood (perplexity is its exponential) and next-token accuracy over `windows` windows
    of context, and how far greedy generation from `prompts` prompts agrees with the float model's."""

    windows: int
    positions: int
    float_nll: float  # mean over positions, nats
    nvdla_nll: float
    float_correct: int
    nvdla_correct: int
    prompts: int
    greedy_tokens: int  # tokens each path generated, over all prompts
    greedy_agree: int  # positions where the INT8 continuation's token equals the float one's
    greedy_prefix: int  # tokens before the first difference, summed over prompts
    saturations: int  # SDP saturations over the held-out windows

    @property
    def float_perplexity(self) -> float:
        return math.exp(self.float_nll)

    @property
    def nvdla_perplexity(self) -> float:
        return math.exp(self.nvdla_nll)

    def to_dict(self) -> dict[str, Any]:
        return {"windows": self.windows, "positions": self.positions,
                "float_perplexity": round(self.float_perplexity, 4), "nvdla_perplexity": round(self.nvdla_perplexity, 4),
                "float_correct": self.float_correct, "nvdla_correct": self.nvdla_correct, "prompts": self.prompts,
                "greedy_tokens": self.greedy_tokens, "greedy_agree": self.greedy_agree,
                "greedy_prefix": self.greedy_prefix, "saturations": self.saturations}  # fmt: skip


@dataclass(frozen=True)
class TaskAccuracy:
    """A trained model's task accuracy as one run gives it (float against the run through the datapath at
    `precision`, under `recipe`), or why the build could not be programmed for the run (`error`)."""

    model: str
    hw: str
    precision: Precision
    recipe: str  # the run's quantization recipe in words (studies.accuracy.QuantSettings.recipe)
    result: TrainedAccuracy | LmAccuracy | None
    error: str = ""

    def __post_init__(self) -> None:
        if (self.result is None) == (not self.error):
            raise ValueError("a task accuracy has a result or an error, not both or neither")

    def to_dict(self) -> dict[str, Any]:
        if self.result is None:
            return {"model": self.model, "hw": self.hw, "error": self.error}
        return {"model": self.model, "hw": self.hw, "precision": self.precision.value, **self.result.to_dict()}


@dataclass(frozen=True)
class AccuracyReport:
    """What `--quantize` adds to a map, generate or serve run: the recipe, the block's per-matmul errors
    against float32 and, for a shipped trained model, its task accuracy."""

    granularity: Granularity
    calibration: Calibration
    dynamic: bool
    prune: Pruning
    recipe: str
    calibration_data: str  # the user's file, or SEEDED_CALIBRATION
    layers: tuple[LayerError, ...]
    task: TaskAccuracy | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "granularity": self.granularity.value,
            "calibration": str(self.calibration),
            "dynamic": self.dynamic,
            "prune": str(self.prune) or "none",
            "calibration_data": self.calibration_data,
            "reference": REFERENCE,
            "layers": [e.to_dict() for e in self.layers],
            **({"task": {"recipe": self.task.recipe, **self.task.to_dict()}} if self.task else {}),
        }
