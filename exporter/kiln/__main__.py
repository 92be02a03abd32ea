"""python -m kiln: the kiln command line (kiln.cli.main), for where the `kiln` script is not on PATH."""
from kiln.cli.main import main

if __name__ == "__main__":
    main(prog_name="kiln")
