"""Settings: every one documented in .env.example, and the example loads as it is."""
from pathlib import Path

from oracle.settings import Settings

REPO = Path(__file__).resolve().parent.parent


def test_env_example_lists_every_setting_and_loads():
    example = REPO / ".env.example"
    names = {line.split("=", 1)[0] for line in example.read_text().splitlines() if line and not line.startswith("#")}
    aliases = {field.validation_alias for field in Settings.model_fields.values()}
    assert aliases == names
    loaded = Settings(_env_file=example)
    defaults = Settings(_env_file=None)
    assert defaults.model_dump(exclude={"chroma_url"}) == loaded.model_dump(exclude={"chroma_url"})
    assert not loaded.chroma_url


def test_environment_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("ORACLE_NOTES_DIR", str(tmp_path / "vault"))
    monkeypatch.setenv("ORACLE_K", "5")
    settings = Settings(_env_file=None)
    assert (tmp_path / "vault", 5) == (settings.notes_dir, settings.k)
