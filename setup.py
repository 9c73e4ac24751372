"""Build the Cython extension modules of bayes_subsample.

Every ``*.pyx`` file below ``bayes_subsample/`` becomes one extension module.
All of them link numpy's static ``npyrandom`` library (needed by
``numpy/random/c_distributions.pxd``) and are compiled with OpenMP where the
compiler supports it (set ``BAYES_SUBSAMPLE_NO_OPENMP=1`` to disable).
"""
import os
import sys
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: parallel jobs of the build (Cython translation and C compilation): one per
#: core this process may use, or BAYES_SUBSAMPLE_CYTHON_JOBS
try:
    _CORES = len(os.sched_getaffinity(0))
except AttributeError:  # not Linux
    _CORES = os.cpu_count() or 1
JOBS = int(os.environ.get("BAYES_SUBSAMPLE_CYTHON_JOBS", "0")) or _CORES

NUMPY_RANDOM_LIB = os.path.join(os.path.dirname(np.__file__), "random", "lib")

use_openmp = sys.platform.startswith("linux") and not os.environ.get(
    "BAYES_SUBSAMPLE_NO_OPENMP"
)
# -ffp-contract=off: no fused multiply-adds formed, so a SIMD loop (see
# models/_simd.h, compiled for several instruction sets) and its scalar tail give
# the same bits, on every machine (x86-64's baseline has no FMA anyway)
compile_args = ["-O3", "-ffp-contract=off"]
link_args = []
if use_openmp:
    compile_args.append("-fopenmp")
    link_args.append("-fopenmp")


class ParallelBuildExt(build_ext):
    """``build_ext`` compiling the C files in ``JOBS`` parallel jobs unless
    ``-j`` says otherwise (pip's builds pass none, and 20 modules compiled
    one after the other took minutes)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


def make_extensions():
    exts = []
    for pyx in sorted(glob(os.path.join("bayes_subsample", "**", "*.pyx"), recursive=True)):
        name = os.path.splitext(pyx)[0].replace(os.sep, ".")
        exts.append(
            Extension(
                name,
                [pyx],
                # the C headers of the compiled models (models/_simd.h), which
                # modules elsewhere reach through the models' .pxd files
                include_dirs=[np.get_include(), os.path.join("bayes_subsample", "models")],
                library_dirs=[NUMPY_RANDOM_LIB],
                libraries=["npyrandom", "m"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=compile_args,
                extra_link_args=link_args,
                depends=glob(os.path.join("bayes_subsample", "models", "*.h")),
            )
        )
    return exts


setup(
    ext_modules=cythonize(
        make_extensions(),
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "cpow": True,
        },
        nthreads=JOBS if JOBS > 1 else None,
    ),
    cmdclass={"build_ext": ParallelBuildExt},
)
