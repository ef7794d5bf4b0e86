"""The ``roofline_format_*`` gauges: each node's roofline per weight format
(``status.nodes[].weightFormats[]``, ``core/node_formats.py``).

Labels ``profile``, ``node``, ``gpu``, ``product``, ``dtype`` (those of the per-GPU gauges, naming
the GPU whose numbers they are, so a query divides a format's peak by the dtype's
``roofline_peak_flops_per_second`` on the same five labels) and ``weight_format``; the interval
gauges add ``bound`` (``low``, ``high``).

``weight_format`` is the format's canonical name (``awq-int4-g128``, ``gptq-int8-g64-asym``,
``int8-w8a8``, ``fp8-w8a8``), which every reader checks with ``weight_formats.parse_weight_format``
(it reads the name back to itself): five families, four group sizes, ``-asym`` on GPTQ only, 22
values in all, never a free-form string such as the kernel that ran the GEMM. A node carries at
most :data:`~roofline_profiler.core.limits.MAX_WEIGHT_FORMATS` formats, so a node adds at most
that many series to each family. The series come from the snapshot at scrape time: a node that
leaves the profile, or a format its latest profile no longer measured, is gone from the next
scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.compact_formats import CompactFormat

FORMAT_ROOFLINE_LABELS = ["profile", "node", "gpu", "product", "dtype", "weight_format"]
PEAK_GAUGE = "roofline_format_peak_flops_per_second"
RIDGE_POINT_GAUGE = "roofline_format_ridge_point"
MIN_BATCH_GAUGE = "roofline_format_recommended_min_batch"
PEAK_INTERVAL_GAUGE = "roofline_format_peak_interval_flops_per_second"
RIDGE_POINT_INTERVAL_GAUGE = "roofline_format_ridge_point_interval"
MIN_BATCH_INTERVAL_GAUGE = "roofline_format_recommended_min_batch_interval"


@dataclass(frozen=True)
class FormatRooflineSample:
    """One weight format's roofline on one node, with the labels of the GPU it is of."""

    node: str
    gpu: str
    product: str
    dtype: str
    roofline: CompactFormat


def format_roofline_samples(
    records: Mapping[str, NodeRecord],
) -> tuple[FormatRooflineSample, ...]:
    """Every node's formats. A format names the GPU its numbers are of; a node restored from a
    status entry that lost its per-GPU entries knows only its worst GPU's product, which then
    stands for the others'."""
    samples: list[FormatRooflineSample] = []
    for name in sorted(records):
        result = records[name].result
        if result is None or not result.weight_formats:
            continue
        products = {gpu.index: gpu.product for gpu in result.gpus}
        fallback = result.worst_gpu().product
        samples.extend(
            FormatRooflineSample(
                name, str(f.gpu), products.get(f.gpu, fallback), result.dtype, roofline=f
            )
            for f in result.weight_formats
        )
    return tuple(samples)


def format_roofline_families(
    snapshots: Iterable[tuple[str, tuple[FormatRooflineSample, ...]]],
) -> list[GaugeMetricFamily]:
    """The six families from ``(profile, samples)`` pairs: each number, then its interval."""
    labels = FORMAT_ROOFLINE_LABELS
    bounded = [*labels, "bound"]
    peak = GaugeMetricFamily(
        PEAK_GAUGE,
        "Measured peak FLOP/s of the weight format's GEMM (an int8 multiply-add counts as two).",
        labels=labels,
    )
    ridge = GaugeMetricFamily(
        RIDGE_POINT_GAUGE,
        "Arithmetic intensity (FLOP per byte) where the weight format's compute and memory "
        "bounds meet.",
        labels=labels,
    )
    batch = GaugeMetricFamily(
        MIN_BATCH_GAUGE,
        "Smallest decode batch of the weight format that reaches the efficiency threshold.",
        labels=labels,
    )
    peak_interval = GaugeMetricFamily(
        PEAK_INTERVAL_GAUGE, "95% interval of the weight format's peak FLOP/s.", labels=bounded
    )
    ridge_interval = GaugeMetricFamily(
        RIDGE_POINT_INTERVAL_GAUGE,
        "95% interval of the weight format's ridge point.",
        labels=bounded,
    )
    batch_interval = GaugeMetricFamily(
        MIN_BATCH_INTERVAL_GAUGE,
        "95% interval of the weight format's recommended min batch.",
        labels=bounded,
    )
    for profile, samples in snapshots:
        for s in samples:
            f = s.roofline
            values = [profile, s.node, s.gpu, s.product, s.dtype, f.name]
            peak.add_metric(values, f.peak_flops_per_second)
            ridge.add_metric(values, f.ridge_point)
            batch.add_metric(values, f.recommended_min_batch)
            intervals = (
                (peak_interval, f.peak_interval),
                (ridge_interval, f.ridge_point_interval),
                (batch_interval, f.recommended_min_batch_interval),
            )
            for family, interval in intervals:
                if interval is not None:
                    family.add_metric([*values, "low"], interval[0])
                    family.add_metric([*values, "high"], interval[1])
    return [peak, ridge, batch, peak_interval, ridge_interval, batch_interval]
