"""`memctl semantic`: recall by meaning, with a local sentence encoder (optional)."""

from __future__ import annotations

import sys

import typer

from memctl.context import JsonOption, State, db_exists, err, fail, no_database_yet, open_store
from memctl.render import count, print_json
from memstore.errors import NoDatabase, SemanticUnavailable

app = typer.Typer(
    help="Semantic recall: a local sentence encoder beside the keyword path (optional).",
    no_args_is_help=True,
)


@app.command("status")
def semantic_status(json: JsonOption = False) -> None:
    """Whether recall uses the semantic model (its files checked), where it is, and how many
    vectors are stored."""
    from memstore.recall.model_files import ENCODER_PACKAGE, ENCODER_VERSION, MODEL_NAME
    from memstore.recall.vectors import SemanticModel

    model = SemanticModel()
    reason = model.unavailable_reason()
    if reason is None:
        try:
            model.encoder()  # that the files load, not only that they are there
        except SemanticUnavailable as error:
            reason = str(error)
    present = live = 0  # no database yet: the model's state is still worth telling
    if db_exists():
        with open_store(read_only=True) as store:
            present, live = store.vector_counts(MODEL_NAME)
    status = {
        "on": reason is None,
        "reason": reason or "",
        "model": MODEL_NAME,
        "package": f"{ENCODER_PACKAGE}=={ENCODER_VERSION}",
        "folder": str(model.folder),
        "memories": live,
        "vectors": present,
    }
    if json:
        print_json(status)
        return
    print(f"semantic recall: {'on' if reason is None else 'off (' + reason + ')'}")
    where = f"in {status['folder']}" if model.folder.is_dir() else "not installed"
    print(f"model: {status['model']} ({status['package']}) {where}")
    print(f"vectors: {present} of {count(live, 'memory', 'memories')}")


@app.command("index")
def semantic_index() -> None:
    """Compute the vectors of memories that have none (recall also does, when it needs them)."""
    import time

    from memstore.recall.vectors import SemanticIndex, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        fail(f"semantic recall is off: {reason}")

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rcomputing vectors: {done}/{total}")
        if done == total:
            sys.stderr.write("\n")

    if no_database_yet():  # no memory to compute a vector of: none is made for it
        raise NoDatabase(str(State.db))
    started = time.perf_counter()
    with open_store() as store:
        computed = SemanticIndex(store).index_all(show if sys.stderr.isatty() else None)
    err(f"computed {count(computed, 'vector')} in {time.perf_counter() - started:.1f} s")
