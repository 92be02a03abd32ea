"""Helpers shared by test modules: running the native kiln-run and the kiln CLI."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kiln_run_binary() -> str:
    from kiln.vm._native import kiln_run_path

    return kiln_run_path()


def run_kiln_run(*args, check=True):
    """Runs the native kiln-run; returns the CompletedProcess."""
    proc = subprocess.run([kiln_run_binary(), *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"kiln-run {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_kiln_cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "kiln.cli.main", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"kiln {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
