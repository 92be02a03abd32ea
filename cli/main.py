"""kiln export / run / dump: the command-line face of the exporter and the runtime."""
from __future__ import annotations

import subprocess
import sys
import traceback

import click

from .loading import load_program_class


def _error(message: str) -> None:
    """Prints `kiln: error: MESSAGE` as one line."""
    one_line = " ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    click.echo(f"kiln: error: {one_line}", err=True)


class _Group(click.Group):
    """Every error is one line `kiln: error: ...` and a non-zero exit (the traceback only with --verbose)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        verbose = "--verbose" in args
        try:
            code = super().main(args, prog_name or "kiln", complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:  # usage errors: a missing file, option or class
            if verbose:
                traceback.print_exc()
            _error(e.format_message())
            code = e.exit_code
        except click.Abort:
            _error("aborted")
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:  # every failure becomes one line, not a traceback
            if ctx.obj and ctx.obj.get("verbose"):
                traceback.print_exc()
            notes = "".join(f" {note}" for note in getattr(e, "__notes__", ()))
            _error(f"{type(e).__name__}: {str(e) or type(e).__name__}{notes}")
            ctx.exit(1)


@click.group(cls=_Group)
@click.option("--verbose", is_flag=True, help="Show full tracebacks on errors; export also prints each stage's time.")
@click.pass_context
def main(ctx, verbose):
    """kiln: compile Python array programs into .vmfb modules and run them."""
    ctx.obj = {"verbose": verbose}


@main.command()
@click.argument("program")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Module file to write (.vmfb).")
@click.option("--ir", "print_ir", is_flag=True, help="Also print the program's IR.")
@click.pass_context
def export(ctx, program, output, print_ir):
    """Trace and compile PROGRAM (FILE.py:ClassName or package.module:ClassName) into a module file.

    With --verbose (before the command: kiln --verbose export ...), prints the time of each stage:
    load, trace, passes, fusion, each kernel (compiled or read from the cache), link, lower,
    serialize, write.
    """
    from kiln import Program
    from kiln.compiler.timing import recording, stage

    with recording() as timings:
        with stage("load", program):
            cls = load_program_class(program)
        artifact = Program.get_compiled_artifact(cls)
        if print_ir:
            click.echo(Program.get_ir(cls))
        with stage("write", output):
            artifact.save(output)
    click.echo(f"wrote {output} ({len(artifact.bytes)} bytes)")
    if ctx.obj and ctx.obj.get("verbose"):
        click.echo("export stages (wall clock):")
        click.echo(timings.format())


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("module", type=click.Path(exists=True, dir_okay=False))
@click.option("--function", "-f", required=True, help="Exported function to call.")
@click.option("--input", "-i", "inputs", multiple=True, help="An argument: 2x3xf32=1,2,3,4,5,6 or @x.npy.")
@click.option("--output", "-o", "outputs", multiple=True, help="Write a result: @y.npy.")
@click.option("--workers", type=int, default=None, help="Worker threads (default: one per core).")
def run(module, function, inputs, outputs, workers):
    """Run FUNCTION of MODULE in the C runtime (the same syntax and output as kiln-run)."""
    from kiln.vm._native import kiln_run_path

    argv = [kiln_run_path(), f"--module={module}", f"--function={function}"]
    argv += [f"--input={x}" for x in inputs] + [f"--output={x}" for x in outputs]
    if workers is not None:
        argv.append(f"--workers={workers}")
    sys.stdout.flush()
    proc = subprocess.run(argv, stderr=subprocess.PIPE, text=True, errors="replace")
    for line in proc.stderr.splitlines():  # kiln-run's errors are kiln's
        click.echo(line.replace("kiln-run: error: ", "kiln: error: ", 1), err=True)
    if proc.returncode:
        sys.exit(proc.returncode)


@main.command()
@click.argument("module", type=click.Path(exists=True, dir_okay=False))
def dump(module):
    """Print MODULE's functions, globals, kernels and disassembled bytecode."""
    from kiln.vm.reader import dump_text

    with open(module, "rb") as f:
        data = f.read()
    click.echo(dump_text(data))


if __name__ == "__main__":
    main()
