#!/usr/bin/env bash
# Build one of NVIDIA's NVDLA builds as a Verilator model, from an nvdla/hw checkout or bare mirror.
#
#   validation/nvdla_rtl/build.sh SRC WORK [PROJECT]
#
# SRC     an nvdla/hw git checkout or bare mirror, or (nv_small only) an already extracted tree (a
#         folder with vmod/, spec/, tools/, verif/verilator/).
# WORK    a folder of ours: the tree is extracted to WORK/hw (branch nv_small) or WORK/hw-master and
#         built there; nothing of NVIDIA's is written into this repository. Prints the path of the
#         built VNV_nvdla on success.
# PROJECT nv_small (default: branch nv_small, its own Verilator file list) or a build of branch
#         master's spec/defs (nv_small_256_full, nv_large, nv_medium_1024_full, ...): master's file
#         list is stale (nvdla/hw issue 293), so it is written from the generated tree, and the
#         testbench is branch nv_small's nvdla.cpp (master's assumes a wide bus) with the secondary
#         port's data members taken by address like the primary's.
#
# Steps and why (measured on this machine type, see docs/validation.md):
#  - a fixed tree.make instead of the interactive `make` (no DesignWare, system gcc/perl/java);
#  - NVIDIA's FPGA register-array RAM models (rams/fpga/small_rams) put first on the include
#    path: with the behavioural RAMPDP_* models, Verilator 5 builds a model on which convolutions
#    hang or fail their CRC;
#  - Verilator 5 needs --no-timing and -y rams/model (RAM models missing from the .f file).
# Needs: verilator (Debian 12's 5.006 works), perl with YAML/Capture::Tiny/XML::Simple, java, g++.
set -euo pipefail
src="${1:?usage: build.sh SRC WORK [PROJECT]  (SRC: nvdla/hw checkout or mirror, WORK: build folder)}"
work="${2:?usage: build.sh SRC WORK [PROJECT]}"
proj="${3:-nv_small}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
if [ "$proj" = nv_small ]; then branch=nv_small; hw="$work/hw"; else branch=master; hw="$work/hw-master"; fi

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
  elif git -C "$src" rev-parse --verify -q "$branch" >/dev/null; then
    echo "build.sh: extracting branch $branch of $src" >&2
    git -C "$src" archive "$branch" vmod spec tools verif/verilator verif/tools Makefile | tar x -C "$hw"
    git -C "$src" show "$branch:LICENSE" > "$hw/LICENSE"   # tools/bin/depth finds the top by it
    git -C "$src" show "$branch:.cleanme" > "$hw/.cleanme"
    git -C "$src" rev-parse "$branch" > "$hw/.source_commit"
  else
    echo "build.sh: $src is neither an nvdla/hw git repository with branch $branch nor an extracted tree" >&2
    exit 1
  fi
fi
[ -f "$hw/spec/defs/$proj.spec" ] || {
  echo "build.sh: no build '$proj' in $src ($branch); one of: $(cd "$hw/spec/defs" && ls *.spec | sed 's/.spec$//' | grep -v projects | tr '\n' ' ')" >&2; exit 1; }

cd "$hw"
cat > tree.make <<MK
PROJECTS := $proj
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

if [ ! -d "outdir/$proj/vmod/nvdla" ]; then
  echo "build.sh: generating $proj's RTL and register specs (tmake -build vmod, ~75-120 s)" >&2
  tools/bin/tmake -build vmod > "$work/tmake_$proj.log" 2>&1 || { tail -20 "$work/tmake_$proj.log" >&2; exit 1; }
fi

vdir="$hw/verif/verilator"
flist="$vdir/verilator_${proj}_fpga.f"
out="../../outdir/$proj/vmod"
if [ ! -f "$flist" ]; then
  if [ "$proj" = nv_small ]; then
    sed 's#^-I../../outdir/nv_small/vmod/rams/synth$#-I../../outdir/nv_small/vmod/rams/fpga/small_rams\n&#' \
      "$vdir/verilator_nv_small.f" > "$flist"
    grep -q small_rams "$flist" || { echo "build.sh: could not insert the FPGA RAM path into $flist" >&2; exit 1; }
  else  # written from the generated tree (NVDLA_RTL_RECIPE: the FPGA register-array RAMs first)
    {
      for d in "$hw/outdir/$proj/vmod/nvdla"/*/; do n="$(basename "$d")"; echo "-y $out/nvdla/$n"; echo "-I$out/nvdla/$n"; done
      for r in rams/fpga/model rams/synth rams/model; do
        [ -d "$hw/outdir/$proj/vmod/$r" ] && { echo "-y $out/$r"; echo "-I$out/$r"; }
      done
      echo "-I$out/vlibs"; echo "-I$out/include"; echo "-y $out/vlibs"
      for f in "$hw/outdir/$proj/vmod/fifos"/*.v; do [ -f "$f" ] && echo "-v $out/fifos/$(basename "$f")"; done
      echo "-v $out/vlibs/RANDFUNC.vlib"; echo "-v $out/vlibs/nv_assert_no_x.vlib"
      echo "-v $out/nvdla/nocif/NV_NVDLA_XXIF_libs.v"
      printf '%s\n' -DNO_PLI_OR_EMU -DNO_PLI -DDESIGNWARE_NOEXIST -DSYNTHESIS -Wno-moddup -Wno-fatal \
        "--top-module NV_nvdla" "$out/nvdla/top/NV_nvdla.v"
    } > "$flist"
  fi
fi

mdir="$hw/outdir/$proj/verilator"
if [ "$proj" = nv_small ]; then
  cp "$vdir/nvdla.cpp" "$work/tb_$proj.cpp"
else  # branch nv_small's testbench; the secondary port's data like the primary's (AXI_WDATA_MKPTR)
  # and a 256-bit bus case (nv_large): 32-bit words like the 512-bit case, a 32-bit write strobe
  git -C "$src" show nv_small:verif/verilator/nvdla.cpp \
    | sed 's#\(\.[wr]_[wr]data = \)dla->nvdla_core2cvsram#\1AXI_WDATA_MKPTR dla->nvdla_core2cvsram#' \
    | sed 's@^\(#elif NVDLA_PRIMARY_MEMIF_WIDTH == 512\)@#elif NVDLA_PRIMARY_MEMIF_WIDTH == 256\n#\tdefine AXI_WDATA_TYPE uint32_t\n#\tdefine AXI_WDATA_TYLEN 32\n#\tdefine AXI_WDATA_MKPTR\n#\tdefine AXI_WSTRB_TYPE uint32_t\n\1@' \
    > "$work/tb_$proj.cpp"
  [ "$(grep -c 'AXI_WDATA_MKPTR dla->nvdla_core2cvsram' "$work/tb_$proj.cpp")" = 2 ] \
    && grep -q 'NVDLA_PRIMARY_MEMIF_WIDTH == 256' "$work/tb_$proj.cpp" \
    || { echo "build.sh: could not adapt branch nv_small's nvdla.cpp for $proj's secondary port" >&2; exit 1; }
  cp "$work/tb_$proj.cpp" "$vdir/nvdla_$proj.cpp"
fi
if [ ! -f "$mdir/VNV_nvdla.mk" ]; then
  echo "build.sh: verilating $proj (~20-40 s)" >&2
  tb="nvdla.cpp"; [ "$proj" = nv_small ] || tb="nvdla_$proj.cpp"
  # nv_small's list misses some RAM models (rams/model); the generated lists have the folder
  (cd "$vdir" && verilator --no-timing -Wno-fatal -Wno-lint -Wno-style --cc --exe \
    -f "verilator_${proj}_fpga.f" -y "$out/rams/model" --Mdir "../../outdir/$proj/verilator/" "$tb" -o VNV_nvdla \
    --output-split 20000 -j 2) > "$work/verilate_$proj.log" 2>&1 \
    || { tail -20 "$work/verilate_$proj.log" >&2; exit 1; }
fi
# Our one change to the testbench (in the build folder only): log every edge of the interrupt
# line, so an operation's end is the cycle the interrupt rises, not when CSB polling notices it.
tbsrc="nvdla.cpp"; [ "$proj" = nv_small ] || tbsrc="nvdla_$proj.cpp"
sed 's#^\(\s*\)axi_dbb->eval();#\1{ static int nvsim_intr = 0; if (dla->dla_intr != nvsim_intr) { nvsim_intr = dla->dla_intr; printf("(%lu) nvdla-sim: dla_intr %d\\n", ticks, nvsim_intr); } }\n&#' \
  "$work/tb_$proj.cpp" > "$mdir/$tbsrc.new"
grep -q nvsim_intr "$mdir/$tbsrc.new" || { echo "build.sh: could not add the interrupt log to nvdla.cpp" >&2; exit 1; }
# compile DIR LOG WHAT: install DIR/$tbsrc.new if it changed, then (re)build DIR's model if stale
compile() {
  cmp -s "$1/$tbsrc.new" "$1/$tbsrc" || mv "$1/$tbsrc.new" "$1/$tbsrc"
  rm -f "$1/$tbsrc.new"
  if [ ! -x "$1/VNV_nvdla" ] || [ "$1/$tbsrc" -nt "$1/VNV_nvdla" ]; then
    echo "build.sh: compiling $3" >&2
    make -C "$1" -f VNV_nvdla.mk -j2 OPT_FAST=-O1 OPT_SLOW=-O0 VM_PARALLEL_BUILDS=1 > "$work/$2" 2>&1 \
      || { tail -20 "$work/$2" >&2; exit 1; }
  fi
}
mlog=make.log; [ "$proj" = nv_small ] || mlog="make_$proj.log"
compile "$mdir" "$mlog" "the $proj model (~2.5 min on 2 cores)"
# variant DIR SED MARK LOG WHAT: a copy of the model folder whose testbench is the current one edited
# by SED (MARK must then be in it), recompiled there (only the testbench file); the default is untouched
variant() {
  [ -d "$1" ] || cp -a "$mdir" "$1"
  sed "$2" "$mdir/$tbsrc" > "$1/$tbsrc.new"
  grep -q "$3" "$1/$tbsrc.new" || { echo "build.sh: could not make $5 from nvdla.cpp" >&2; exit 1; }
  compile "$1" "$4" "$5"
  mdir="$1"
}
# Optional: the same model with the testbench's second-level clock gating turned off
# (NVDLA_TB_CLOCK_GATING=off; nvdla.cpp sets tmc2slcg_disable_clock_gating = 0). Used to show why
# long weight-stationary chains slow down (docs/validation.md).
if [ "${NVDLA_TB_CLOCK_GATING:-on}" = "off" ]; then
  variant "$hw/outdir/$proj/verilator_no_clock_gating" \
    's#tmc2slcg_disable_clock_gating = 0;#tmc2slcg_disable_clock_gating = 1;#' \
    "tmc2slcg_disable_clock_gating = 1;" make_ncg.log "the testbench without clock gating"
fi
# Optional: the same model with a fixed-latency memory (NVDLA_TB_MEMORY=fixed_latency). NVIDIA's
# AXIResponder moves one entry a cycle into a read pipeline of AXI_R_LATENCY entries and takes one out
# only while the DLA holds r_rready high, so every cycle of back-pressure lengthens the pipeline for the
# rest of the run, bubbles included: a memory whose read latency grows with the run (32 -> 163 and 316
# cycles on nv_small_256_full's attn_o and ffn2, docs/validation.md 5e). Here the surplus bubbles at
# the pipeline's head are dropped, so a beat the DLA stalls still waits, and the latency returns to
# AXI_R_LATENCY once the stalled beats are taken. The DUT is untouched.
if [ "${NVDLA_TB_MEMORY:-nvidia}" = "fixed_latency" ]; then
  variant "$mdir""_fixed_latency" \
    's#^\(\s*\)if (\*dla.r_rready \&\& !r0_fifo.empty()) {#\1while (r0_fifo.size() > AXI_R_LATENCY + 1 \&\& !r0_fifo.front().rvalid) r0_fifo.pop();  /* nvdla-sim: fixed latency */\n\1if (*dla.r_rready \&\& !r0_fifo.empty()) {#' \
    "nvdla-sim: fixed latency" make_fixed_latency.log "the testbench with a fixed-latency memory"
fi
echo "$mdir/VNV_nvdla"
