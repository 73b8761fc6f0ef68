"""Bitrate of CEPAM against scalar SDQ, noisy SDQ and the information limit.

Everything is in **bits per coordinate**, with Gaussian noise of standard
deviation ``sigma``; two sources, ``"gaussian"`` (``x ~ N(0, s^2)``) and
``"uniform"`` (``x ~ U[-s, s]``).  Four modules, one concern each:

* :mod:`cepam.bitrate.theory`: the bound :func:`mutual_information` and the
  high-resolution gap from the packing density (:func:`packing_density`,
  :func:`high_resolution_gap`);
* :mod:`cepam.bitrate.ideal`: the ideal rates (:func:`ideal_rate`,
  :func:`ideal_sdq_rate`, :func:`spec_ideal_rate`);
* :mod:`cepam.bitrate.benchmark`: :func:`run_benchmark`, actual payload
  lengths (header, body and tag) of ``cepam.encode`` for CEPAM on every
  available lattice and both coders, scalar SDQ at the same noise variance and
  Gaussian+SDQ;
* :mod:`cepam.bitrate.report`: the rows as CSV and Markdown and the figure,
  :func:`write_results` (matplotlib is imported for the figure only).

``cepam bench bitrate`` (:mod:`cepam.bitrate.cli`) runs it from the command
line.  numpy and scipy; matplotlib for the plot only.
"""

from __future__ import annotations

from . import benchmark, ideal, report, theory
from .benchmark import (MAX_SEED, MIN_DRAWS, Scheme, available_lattices, default_schemes,
                        run_benchmark, sample_source)
from .ideal import ideal_rate, ideal_sdq_rate, spec_ideal_rate
from .report import (RESULT_FILES, plot_rows, prepare_output_directory, rows_from_csv,
                     rows_to_csv, rows_to_markdown, write_results)
from .theory import (
    DESIGN_HIGH_RESOLUTION_GAP,
    DESIGN_IDEAL_GAUSSIAN_Z1,
    DESIGN_IDEAL_UNIFORM,
    DESIGN_MUTUAL_INFORMATION_UNIFORM,
    DESIGN_SCALAR_SDQ_UNIFORM,
    S_OVER_SIGMA,
    SOURCES,
    geometric_entropy,
    high_resolution_gap,
    mutual_information,
    packing_density,
)

# The names cepam.bitrate exported as one module, in its order.  The design
# notes' tables DESIGN_SCALAR_SDQ_UNIFORM and DESIGN_HIGH_RESOLUTION_GAP are
# importable from here too, as before, without being part of the star-import.
__all__ = [*theory.__all__, *benchmark.__all__, *report.__all__]
