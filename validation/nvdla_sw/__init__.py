"""Scripts that read a user's checkout of NVIDIA's software (github.com/nvdla/sw): the register address maps
of its firmware headers and, for issue 57, its loadables and regression goldens. NVIDIA's files stay in the
checkout; what these scripts derive from them is committed with the command that made it."""


def write_rows(out, *, what: str, command: str, missing: list[str], rows: list[dict]) -> None:
    """Write a script's rows with what they are, the command that made them, the date and what the checkout
    lacked; say so on stderr."""
    import datetime
    import sys

    from nvdla_sim.files import write_json

    doc = {"what": what, "command": command, "date": datetime.date.today().isoformat(), "missing": missing}
    write_json(out, {**doc, "rows": rows})
    print(f"wrote {out}" + (f"; missing: {', '.join(missing)}" if missing else ""), file=sys.stderr)
