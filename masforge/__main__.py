"""``python -m masforge`` is the same as the ``masforge`` command."""

from masforge.cli import main

if __name__ == "__main__":  # importing the module (documentation tools walk every module) runs nothing
    main()
