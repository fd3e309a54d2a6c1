#!/usr/bin/env bash
# Build NVIDIA's nv_small RTL as a Verilator model, from an nvdla/hw checkout or bare mirror.
#
#   validation/nvdla_rtl/build.sh SRC WORK
#
# SRC  an nvdla/hw git checkout or bare mirror (branch nv_small is used), or an already
#      extracted tree (a folder with vmod/, spec/, tools/, verif/verilator/).
# WORK a folder of ours: the tree is extracted to WORK/hw and built there; nothing of NVIDIA's
#      is written into this repository. Prints the path of the built VNV_nvdla on success.
#
# Steps and why (measured on this machine type, see docs/validation.md):
#  - a fixed tree.make instead of the interactive `make` (no DesignWare, system gcc/perl/java);
#  - NVIDIA's FPGA register-array RAM models (rams/fpga/small_rams) put first on the include
#    path: with the behavioural RAMPDP_* models, Verilator 5 builds a model on which convolutions
#    hang or fail their CRC;
#  - Verilator 5 needs --no-timing and -y rams/model (RAM models missing from the .f file).
# Needs: verilator (Debian 12's 5.006 works), perl with YAML/Capture::Tiny/XML::Simple, java, g++.
set -euo pipefail
src="${1:?usage: build.sh SRC WORK  (SRC: nvdla/hw checkout or mirror, WORK: build folder)}"
work="${2:?usage: build.sh SRC WORK}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
hw="$work/hw"

need() { command -v "$1" >/dev/null 2>&1 || { echo "build.sh: '$1' is missing; $2" >&2; exit 1; }; }
need verilator "install it with: apt-get install -y verilator"
need java "install a JRE (apt-get install -y default-jre-headless)"
need g++ "install it with: apt-get install -y g++"
perl -MYAML -MCapture::Tiny -MXML::Simple -e 1 2>/dev/null || {
  echo "build.sh: perl modules missing; install: apt-get install -y libyaml-perl libcapture-tiny-perl libxml-simple-perl" >&2; exit 1; }

if [ ! -d "$hw/vmod" ]; then
  mkdir -p "$hw"
  if [ -d "$src/vmod" ] && [ -d "$src/verif/verilator" ]; then
    echo "build.sh: copying extracted tree $src" >&2
    cp -a "$src/." "$hw/"
  elif git -C "$src" rev-parse --verify -q nv_small >/dev/null; then
    echo "build.sh: extracting branch nv_small of $src" >&2
    git -C "$src" archive nv_small vmod spec tools verif/verilator verif/tools Makefile | tar x -C "$hw"
    git -C "$src" show nv_small:LICENSE > "$hw/LICENSE"   # tools/bin/depth finds the top by it
    git -C "$src" show nv_small:.cleanme > "$hw/.cleanme"
    git -C "$src" rev-parse nv_small > "$hw/.source_commit"
  else
    echo "build.sh: $src is neither an nvdla/hw git repository with branch nv_small nor an extracted tree" >&2
    exit 1
  fi
fi

cd "$hw"
cat > tree.make <<MK
PROJECTS := nv_small
USE_DESIGNWARE := 0
DESIGNWARE_DIR := /nonexistent
CPP := $(command -v cpp)
GCC := $(command -v gcc)
CXX := $(command -v g++)
PERL := $(command -v perl)
JAVA := $(command -v java)
SYSTEMC := /nonexistent
PYTHON := $(command -v python3)
VERDI_HOME := /nonexistent
NOVAS_HOME := /nonexistent
VCS_HOME := /nonexistent
CLANG := $(command -v gcc)
VERILATOR := verilator
MK
cp .cleanme .cleaned

if [ ! -d outdir/nv_small/vmod/nvdla ]; then
  echo "build.sh: generating RTL and register specs (tmake -build vmod, ~75 s)" >&2
  tools/bin/tmake -build vmod > "$work/tmake.log" 2>&1 || { tail -20 "$work/tmake.log" >&2; exit 1; }
fi

vdir="$hw/verif/verilator"
flist="$vdir/verilator_nv_small_fpga.f"
if [ ! -f "$flist" ]; then
  sed 's#^-I../../outdir/nv_small/vmod/rams/synth$#-I../../outdir/nv_small/vmod/rams/fpga/small_rams\n&#' \
    "$vdir/verilator_nv_small.f" > "$flist"
  grep -q small_rams "$flist" || { echo "build.sh: could not insert the FPGA RAM path into $flist" >&2; exit 1; }
fi

mdir="$hw/outdir/nv_small/verilator"
if [ ! -f "$mdir/VNV_nvdla.mk" ]; then
  echo "build.sh: verilating (~40 s)" >&2
  (cd "$vdir" && verilator --no-timing -Wno-fatal -Wno-lint -Wno-style --cc --exe \
    -f verilator_nv_small_fpga.f -y ../../outdir/nv_small/vmod/rams/model \
    --Mdir ../../outdir/nv_small/verilator/ nvdla.cpp --output-split 20000 -j 2) > "$work/verilate.log" 2>&1 \
    || { tail -20 "$work/verilate.log" >&2; exit 1; }
fi
# Our one change to the testbench (in the build folder only): log every edge of the interrupt
# line, so an operation's end is the cycle the interrupt rises, not when CSB polling notices it.
sed 's#^\(\s*\)axi_dbb->eval();#\1{ static int nvsim_intr = 0; if (dla->dla_intr != nvsim_intr) { nvsim_intr = dla->dla_intr; printf("(%lu) nvdla-sim: dla_intr %d\\n", ticks, nvsim_intr); } }\n&#' \
  "$vdir/nvdla.cpp" > "$mdir/nvdla.cpp.new"
grep -q nvsim_intr "$mdir/nvdla.cpp.new" || { echo "build.sh: could not add the interrupt log to nvdla.cpp" >&2; exit 1; }
# compile DIR LOG WHAT: install DIR/nvdla.cpp.new if it changed, then (re)build DIR's model if stale
compile() {
  cmp -s "$1/nvdla.cpp.new" "$1/nvdla.cpp" || mv "$1/nvdla.cpp.new" "$1/nvdla.cpp"
  rm -f "$1/nvdla.cpp.new"
  if [ ! -x "$1/VNV_nvdla" ] || [ "$1/nvdla.cpp" -nt "$1/VNV_nvdla" ]; then
    echo "build.sh: compiling $3" >&2
    make -C "$1" -f VNV_nvdla.mk -j2 OPT_FAST=-O1 OPT_SLOW=-O0 VM_PARALLEL_BUILDS=1 > "$work/$2" 2>&1 \
      || { tail -20 "$work/$2" >&2; exit 1; }
  fi
}
compile "$mdir" make.log "the model (~2.5 min on 2 cores)"
# Optional: the same model with the testbench's second-level clock gating turned off
# (NVDLA_TB_CLOCK_GATING=off; nvdla.cpp sets tmc2slcg_disable_clock_gating = 0). Only the testbench
# file is recompiled, in a copy of the model folder; the default build is untouched. Used to show why
# long weight-stationary chains slow down (docs/validation.md).
if [ "${NVDLA_TB_CLOCK_GATING:-on}" = "off" ]; then
  ndir="$hw/outdir/nv_small/verilator_no_clock_gating"
  [ -d "$ndir" ] || cp -a "$mdir" "$ndir"
  sed 's#tmc2slcg_disable_clock_gating = 0;#tmc2slcg_disable_clock_gating = 1;#' "$mdir/nvdla.cpp" > "$ndir/nvdla.cpp.new"
  grep -q "tmc2slcg_disable_clock_gating = 1;" "$ndir/nvdla.cpp.new" \
    || { echo "build.sh: could not turn off clock gating in nvdla.cpp" >&2; exit 1; }
  compile "$ndir" make_ncg.log "the testbench without clock gating"
  mdir="$ndir"
fi
echo "$mdir/VNV_nvdla"
