"""Running a genome: a config genome compiled into a program (:mod:`.compile`), a code genome run in the sandbox
(:mod:`.code`), and what a run returns (:mod:`.result`). The genome itself (what a system IS) is
:mod:`masforge.genome`, which imports nothing of this."""
