"""GM marks read by their words, not their spelling: every spelling of a mark holds, with the public
text beside it still read, and story names that borrow a mark's word stay with the players."""
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oracle.lexicon import languages, lexicon
from oracle.marks import marks_of
from oracle.notes.embeds import Vault
from oracle.notes.parse import extract_secrets, parse_note
from oracle.policy import Policy, looks_like_gm
from oracle.settings import DEFAULT_FOLDER_KINDS
from oracle.types import GM, PUBLIC


def parse(path, text, policy=None, vault=None):
    return parse_note(path, text.encode(), DEFAULT_FOLDER_KINDS, policy=policy, vault=vault)


def kept(text, marks=None):
    """(what players read, the rules that hid the rest)."""
    public, secrets, _ = extract_secrets(text, marks) if marks else extract_secrets(text)
    return public, [s.rule for s in secrets]


CLUES = "- [ ] The standing stones hum before the eclipse.\n- [ ] Manus serves the Lich."


@pytest.mark.parametrize(
    "heading",
    [
        "# Secret and Clues", "## 🔑 Secrets & Clues", "### Secrets", "## Define Secrets and Clues",
        "## 10 Secrets & Clues", "## Secrets/Clues", "## Clues and Secrets", "## Ten Secrets and Clues",
        "### 4. Secrets and Clues", "### 4 Secrets and Clues", "## GMNotes", "## GM-Notes", "## DM Stuff",
        "## Notes for the Keeper", "## DM Notes on the cult", "## SECRETS AND CLUES", "\nSecret and Clues\n---",
    ],
)
def test_every_spelling_of_a_secrets_heading_hides_its_section_and_nothing_else(heading):
    public, rules = kept(f"# Tempus Session 05\nWe reached the barrow.\n{heading}\n{CLUES}\n# Loot\nA silver key.")
    assert "standing stones" not in public and "Manus" not in public
    assert "We reached the barrow." in public and "A silver key." in public
    assert 1 == len(rules)


@pytest.mark.parametrize(
    "heading",
    ["## Hidden Valley", "## Private Quill", "## The Secret Garden", "## Secrets of Brokenveil Peak", "## The Secret Door",
     "## Planning the Heist", "## Clues", "## Notes", "## The Keeper", "## Door"],
)
def test_story_headings_that_borrow_a_marks_word_stay_public(heading):
    text = f"{heading}\nThe party found the way in."
    assert (text, []) == kept(text)


@pytest.mark.parametrize("head", ["[!GMNote]", "[!dmnotes]", "[!gm_only]", "[!Secrets]", "[!GM-Notes]+"])
def test_callouts_of_a_gm_type_in_any_spelling(head):
    public, rules = kept(f"Before.\n> {head} Title\n> The cook is the spy.\n\nAfter.")
    assert "cook" not in public and "Before." in public and "After." in public and 1 == len(rules)


@pytest.mark.parametrize("tag", ["#GMNotes", "#gm-only", "#dmnotes", "#secret/plot", "#Spoilers"])
def test_tags_of_a_gm_word_in_any_spelling(tag):
    public, rules = kept(f"Public one.\n\nThe cook is the spy. {tag}\n\nPublic two.")
    assert "cook" not in public and "Public one." in public and "Public two." in public


@pytest.mark.parametrize("tag", ["#secret-service", "#hidden-valley", "#place/hidden-valley", "#privateer"])
def test_tags_that_name_a_story_stay_public(tag):
    text = f"The cook works for the agency. {tag}"
    assert (text, []) == kept(text)


@pytest.mark.parametrize("field", ["DMNotes:: the cook is the spy", "GM Notes:: the cook is the spy",
                                   "- secret:: the cook is the spy"])
def test_dataview_fields_of_a_gm_key_in_any_spelling(field):
    public, _ = kept(f"Mood:: calm\n{field}\nAfter.")
    assert "cook" not in public and "Mood:: calm" in public and "After." in public


@pytest.mark.parametrize("frontmatter", ["tags: [GMNotes]", "GMNotes: true", "dm_only: yes", "tags: secret/plot"])
def test_frontmatter_of_a_gm_word_in_any_spelling(frontmatter):
    assert GM == parse("world/Duke.md", f"---\n{frontmatter}\n---\nThe duke is a traitor.").visibility


@pytest.mark.parametrize("path", ["GMNotes/Plot.md", "DMStuff/Plot.md", "01 - GM Notes/Plot.md", "Prep/Arc.md",
                                  "Campaign/Session 12 Prep.md", "Secrets & Clues/Plot.md", "📜 GM/Plot.md"])
def test_folders_and_files_named_like_gm_material_in_any_spelling(path):
    note = parse(path, "The plot.")
    assert GM == note.visibility and note.rule


@pytest.mark.parametrize(
    "path",
    ["Places/Hidden Valley.md", "NPCs/Private Quill.md", "The Secret Garden.md", "Hidden Realms/The Inn.md",
     "Session Notes/Session 5 - Planning the Heist.md", "heist/characters/gm-rowen.md",
     "Session Notes/Session 13 - The Abbot's Secret.md"],
)
def test_story_names_that_borrow_a_marks_word_stay_public(path):
    note = parse(path, "The party rested.")
    assert (PUBLIC, "") == (note.visibility, note.rule)


# -- The vault's language decides ------------------------------------------------------------------


SPANISH = "Los caballeros cruzaron el pantano con las antorchas y el escudero de Ser Tanneth."


def test_a_word_of_one_language_never_decides_text_in_another():
    # "todos" is English for to-do lists and Spanish for "all".
    spanish = {"Sesion-1.md": f"# Sesión 1\n{SPANISH}\n## Todos los caballeros\nSe reunieron en la torre.\n"}
    vault = Vault({k: v.encode() for k, v in spanish.items()}, Policy())
    note = parse("Sesion-1.md", spanish["Sesion-1.md"], vault=vault)
    assert "es" == vault.conventions.language and "Se reunieron en la torre." in note.text
    english = {"Session 1.md": "# Session 1\nThe knights crossed the marsh with their torches.\n## Todos\nBuy rope.\n"}
    vault = Vault({k: v.encode() for k, v in english.items()}, Policy())
    assert "Buy rope." not in parse("Session 1.md", english["Session 1.md"], vault=vault).text


@pytest.mark.parametrize("heading", ["## Secretos y pistas", "## Notas del DM", "## Notas del máster", "## Preparación"])
def test_spanish_marks_hold_in_a_spanish_vault(heading):
    text = f"# Sesión 3\n{SPANISH}\n{heading}\nEl cocinero es el espía.\n# Botín\nUna llave de plata."
    vault = Vault({"Sesion-3.md": text.encode()}, Policy())
    note = parse("Sesion-3.md", text, vault=vault)
    assert "cocinero" not in note.text and "Una llave de plata." in note.text


# -- The policy's names, composed or decomposed ----------------------------------------------------


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_policy_name_matches_a_note_stored_in_either_unicode_form(form):
    typed = Policy(gm_notes=("Sessões/Segredos.md",), player_notes=("Sessões",))
    on_disk = unicodedata.normalize(form, "Sessões/Segredos.md")
    assert GM == parse(on_disk, "O cozinheiro é o espião.", typed).visibility
    assert [] == typed.unmatched([on_disk])


# -- Embeds publish exactly what they embed ---------------------------------------------------------


def vault_of(files, policy=None, reals=None):
    return Vault({k: v.encode() for k, v in files.items()}, policy or Policy(), reals)


def test_past_the_depth_limit_an_embed_shows_nothing_not_even_its_targets_name():
    files = {"A.md": "A ![[B]]", "B.md": "B ![[C]]", "C.md": "C ![[D]]", "D.md": "D ![[gm/Plot twist]]",
             "gm/Plot twist.md": "The heir lives."}
    text = parse("A.md", files["A.md"], vault=vault_of(files)).text
    assert "A B C D" == text.strip() and "Plot" not in text


def test_a_block_embed_of_a_list_item_is_that_item_alone():
    files = {
        "Clues.md": "## Clues\n- The bell rang. ^bell\n- The cook is the spy.\n  - he poisons the wine\n",
        "Items.md": "- The ring glows.\n  - it hums ^ring\n    - softly\n  - The cook lies.\n",
        "Handout.md": "Heard: ![[Clues#^bell]]\nSeen: ![[Items#^ring]]",
    }
    text = parse("Handout.md", files["Handout.md"], vault=vault_of(files)).text
    assert "Heard: - The bell rang.\nSeen: - it hums - softly" == text
    assert "cook" not in text and "Clues" not in text


def test_a_block_id_on_its_own_line_embeds_the_block_above_it():
    files = {"Days.md": "Cold.\n\nRain all day.\nWind at dusk.\n^weather\n\nOther.", "Log.md": "![[Days#^weather]]"}
    assert "Rain all day. Wind at dusk." == parse("Log.md", files["Log.md"], vault=vault_of(files)).text


def test_a_section_embed_ends_at_an_underlined_heading():
    files = {"Blade.md": "Handout\n=======\nA blade that hums.\n\nPrice\n=====\n300 gp and a favour.",
             "Letter.md": "![[Blade#Handout]]"}
    assert "Handout A blade that hums." == parse("Letter.md", files["Letter.md"], vault=vault_of(files)).text


def test_a_link_to_a_gm_note_is_judged_by_its_targets_rule_too():
    policy = Policy(player_notes=("Handouts",), gm_notes=("Lore/Truth.md",))
    files = {"Lore/Truth.md": "The duke poisoned the king.", "Public/Truth.md": "The duke poisoned the king.",
             "Handouts/Letter.md": "Read this: ![[Public/Truth]]"}
    vault = vault_of(files, policy, reals={"Public/Truth.md": "Lore/Truth.md"})
    assert "Read this:" == parse("Handouts/Letter.md", files["Handouts/Letter.md"], vault=vault).text.strip()
    linked = parse("Public/Truth.md", files["Public/Truth.md"], vault=vault, policy=policy)
    assert (GM, "link into Lore/Truth.md: ORACLE_GM_NOTES: Lore/Truth.md") == (linked.visibility, linked.rule)


def test_a_link_to_a_heading_keeps_the_headings_name():
    files = {"Objetos Mágicos.md": "## vial de sangre +1\nCura.", "Sesion-2.md":
             "Thalorien compra un [[Objetos Mágicos#vial de sangre +1]] y un [[Objetos Mágicos#^x|frasco]]. Ver [[#Botín]]."}
    text = parse("Sesion-2.md", files["Sesion-2.md"], vault=vault_of(files)).text
    assert "Thalorien compra un Objetos Mágicos > vial de sangre +1 y un frasco. Ver Botín." == text


@pytest.mark.parametrize("code, opening", [
    ("es", "# ¡No leer! Solo para el máster"), ("pt", "NÃO leia: spoilers da campanha"), ("fr", "Ne pas lire"),
    ("de", "Nicht lesen – nur für den SL"), ("it", "Non leggere"), ("pl", "Nie czytać, gracze!"),
    ("es", "Spoilers de la campaña"), ("es", "Do not read"),  # the borrowed word, and English, in any vault
])
def test_a_note_opening_with_a_warning_in_its_language_is_kept_from_players(code, opening):
    decision = looks_like_gm("Notas/Trama.md", f"{opening}\nEl heredero vive.", marks_of(code))
    assert GM == decision.visibility and "spoiler warning" in decision.rule


@pytest.mark.parametrize("code, opening", [
    ("es", "No leímos el libro, pero la sesión fue larga."), ("pt", "Não lemos a carta."),
    ("en", "No leer es necesario"),  # a Spanish warning decides nothing in an English vault
])
def test_an_opening_that_warns_of_nothing_keeps_the_note_public(code, opening):
    assert PUBLIC == looks_like_gm("Notas/Diario.md", f"{opening}\nEl heredero vive.", marks_of(code)).visibility


# -- Folders of the game master and of templates, named in the vault's language ---------------------


@pytest.mark.parametrize("code, folder", [
    ("es", "Secretos"), ("pt", "02 - Segredos"), ("de", "Geheim"), ("pl", "_prywatne"), ("fr", "Privé"),
    ("es", "Secrets"), ("pt", "GM"),  # the English and international names hold in every vault
])
def test_a_game_master_folder_in_the_vaults_language_holds_even_inside_the_players_notes(code, folder):
    policy = Policy(player_notes=(f"{folder}/",), language=code)
    assert GM == policy.decide(f"{folder}/Plot.md").visibility


def test_another_languages_folder_name_decides_nothing():
    # Spanish "secretos" says nothing in an English vault: the allowlist decides.
    policy = Policy(player_notes=("Secretos/",), language="en")
    assert PUBLIC == policy.decide("Secretos/Plot.md").visibility


@pytest.mark.parametrize("folder", ["Templates", "_templates", "templater", "Plantillas", "Vorlagen", "02 - Sjablonen"])
def test_a_template_folder_in_any_language_holds_forms_not_facts(folder):
    from oracle.policy import in_templates

    assert in_templates(f"{folder}/Session.md")
    assert GM == looks_like_gm(f"{folder}/Session.md", "", marks_of("en")).visibility
    assert not in_templates("Modelos/Galeón.md")  # models in Spanish, templates in Portuguese: not read as either


@given(data=st.data())
def test_every_game_master_folder_word_of_every_language_holds_however_it_is_written(data):
    """Generated: a word of any language's `[gm] folders`, in any case, numbered or not, at any depth,
    inside the players' allowlist, in a vault of that language: the game master's."""
    code = data.draw(st.sampled_from(languages()))
    word = data.draw(st.sampled_from(sorted(lexicon(code).gm_folders)))
    written = data.draw(st.sampled_from([word, word.upper(), word.title()]))
    folder = data.draw(st.sampled_from(["", "01 - ", "99 ", "_", "3. "])) + written
    parent = data.draw(st.sampled_from(["", "Campaign/", "Notes/Arc 2/"]))
    policy = Policy(player_notes=(f"{parent}{folder}/",), language=code)
    decision = policy.decide(f"{parent}{folder}/Plot.md")
    assert GM == decision.visibility, (code, folder, decision)
