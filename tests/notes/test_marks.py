"""Every way game masters mark their text, read as the README's table says: whole notes by policy,
name, frontmatter and template; passages by comment, callout, Admonition, heading, field and tag;
embeds that publish exactly what they embed."""
import pytest

from oracle.notes.embeds import Vault
from oracle.notes.parse import extract_secrets, parse_note, split_frontmatter
from oracle.policy import UNLISTED, Policy
from oracle.settings import DEFAULT_FOLDER_KINDS, Settings
from oracle.types import GM, PUBLIC


def parse(path, text, policy=None, vault=None):
    return parse_note(path, text.encode(), DEFAULT_FOLDER_KINDS, policy=policy, vault=vault)


def hidden(text):
    public, secrets, _ = extract_secrets(text)
    return public, [(s.start_line, s.end_line, s.rule) for s in secrets]


# -- The game master's policy ------------------------------------------------------------------


POLICY = Policy(player_notes=("Session Notes/", "Handouts", "Campaign Notes.md"), gm_notes=("Handouts/Unreleased*",))


@pytest.mark.parametrize(
    "path, visibility, rule",
    [
        ("Session Notes/Session 12.md", PUBLIC, "ORACLE_PLAYER_NOTES: Session Notes/"),
        ("Handouts/Letters/Letter.md", PUBLIC, "ORACLE_PLAYER_NOTES: Handouts"),
        ("campaign notes.md", PUBLIC, "ORACLE_PLAYER_NOTES: Campaign Notes.md"),
        ("Handouts/Unreleased Map.md", GM, "ORACLE_GM_NOTES: Handouts/Unreleased*"),
        ("Session Prep/Session 12.md", GM, UNLISTED),
        ("NPCs/Villain.md", GM, UNLISTED),
        ("Session Notes/gm/Session 12.md", GM, "folder 'gm' is a game master's folder"),
    ],
)
def test_the_policy_decides_by_path(path, visibility, rule):
    note = parse(path, "Some text.", POLICY)
    assert (visibility, rule) == (note.visibility, note.rule)


def test_the_allowlist_overrides_what_only_looks_like_gm_material():
    assert GM == parse("TODO.md", "Buy dice.").visibility
    assert PUBLIC == parse("TODO.md", "Buy dice.", Policy(player_notes=("TODO.md",))).visibility


def test_marks_inside_an_allowlisted_note_still_hold():
    note = parse("Session Notes/Session 1.md", "---\npublic: false\n---\nText.", POLICY)
    assert (GM, "frontmatter public: False") == (note.visibility, note.rule)


@pytest.mark.parametrize("value", ["Session Notes/, Handouts", '["Session Notes/", "Handouts"]'])
def test_list_settings_take_a_comma_list_or_a_json_list(monkeypatch, value):
    monkeypatch.setenv("ORACLE_PLAYER_NOTES", value)
    assert ["Session Notes/", "Handouts"] == Settings(_env_file=None).player_notes


def test_a_pattern_matching_no_note_is_reported():
    assert ["ORACLE_PLAYER_NOTES: 'Sesion Notes' matches no note"] == Policy(player_notes=("Sesion Notes",)).unmatched(
        ["Session Notes/Session 1.md"]
    )


@pytest.mark.parametrize(
    "path",
    [
        "GM Notes/Plot.md", "DM Notes/Plot.md", "_gm/Plot.md", "GM-only/Plot.md", "Z - DM Only/Plot.md",
        "Campaign/99 - GM/Plot.md", "Campaign/DM Prep/Plot.md", "Spoilers/Plot.md", "Secrets and Clues/Plot.md",
        "Session Prep/Session 5.md", "Session 5 Prep (GM).md", "TODO.md", "Planning/Arc.md", "Templates/Session.md",
        "Game Master/Plot.md",
    ],
)
def test_what_looks_like_gm_material_is_kept_with_its_rule(path):
    note = parse(path, "The plot.")
    assert GM == note.visibility and note.rule


@pytest.mark.parametrize("path", ["Session Notes/Session 5.md", "sessions/Session 5.md", "dmg/Admonitions.md", "Ledger.md"])
def test_ordinary_names_stay_public(path):
    assert PUBLIC == parse(path, "The party rested.").visibility


@pytest.mark.parametrize(
    "text",
    [
        "# Danger! Big Spoilers! Do Not Read!\nThe heir lives.",
        "Spoilers ahead.\nThe heir lives.",
        "\n\n## GM eyes only\nThe heir lives.",
        "Made <% tp.date.now() %>\nThe heir lives.",
    ],
)
def test_a_spoiler_warning_or_a_template_keeps_the_note(text):
    assert GM == parse("Index.md", text).visibility


def test_templater_tags_left_in_a_query_block_of_a_written_note_keep_it_public():
    """A session written from a template whose dataview block still holds `<% tp.file.title %>`
    (a real Spanish vault's last session) is a note, not a form; a tag in its prose is a form."""
    query = '```dataview\nLIST FROM "" WHERE file.name != "<% tp.file.title %>"\n```\n'
    assert PUBLIC == parse("Sesiones/Sesion-6.md", f"## Día 12\nEl caballero cae.\n{query}").visibility
    assert GM == parse("Sesiones/Sesion-7.md", f"## Día <% tp.date.now() %>\n{query}").visibility
    assert GM == parse("Sesiones/Sesion-8.md", "```dataview\nLIST\n```\nCreated <% tp.date.now() %>").visibility


def test_a_spoiler_warning_further_down_keeps_the_note_public():
    assert PUBLIC == parse("factions/Mistcutter.md", "The order.\n> [!WARNING] Spoiler warning!\n> Story.").visibility


# -- Frontmatter ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frontmatter",
    [
        "private: true", "public: false", "publish: false", "hidden: true", "spoiler: true", "gm-only: true",
        "GM_Only: yes", "dm-only: true", "Secret: true", "tags: [gm]", "tags: [secret]", "tags: [dm-only]",
        "tag: gm/plot", "tags: npc secret", "visibility: public\nvisibility: gm", "visibility: gm\nvisibility: public",
        "public: true\nprivate: true", "Visibility: public\nvisibility: gm", "private: maybe",
    ],
)
def test_frontmatter_forms_keep_the_whole_note(frontmatter):
    assert GM == parse("world/Duke.md", f"---\n{frontmatter}\n---\nThe duke is a traitor.").visibility


@pytest.mark.parametrize("frontmatter", ["public: true", "publish: true", "private: false", "tags: [pc, dmg, npc]"])
def test_frontmatter_that_says_public_stays_public(frontmatter):
    note = parse("world/Duke.md", f"---\n{frontmatter}\n---\nThe duke is loyal.")
    assert (PUBLIC, ()) == (note.visibility, note.warnings)


def test_a_duplicated_visibility_key_is_named_in_a_warning():
    note = parse("world/Duke.md", "---\nvisibility: gm\nvisibility: public\n---\nText.")
    assert GM == note.visibility
    assert ["frontmatter gives 'visibility' more than once; the note is treated as game-master-only"] == list(note.warnings)


@pytest.mark.parametrize(
    "text",
    ["\n---\nvisibility: gm\n---\nThe duke is a traitor.", '+++\nvisibility = "gm"\n+++\nThe duke is a traitor.'],
)
def test_a_frontmatter_like_block_that_mentions_visibility_keeps_the_note(text):
    note = parse("world/Duke.md", text)
    assert GM == note.visibility
    assert 1 == len(note.warnings) and "frontmatter-like block" in note.warnings[0]


def test_obsidian_values_in_frontmatter_parse_without_a_warning():
    fm, _, warnings = split_frontmatter("---\nimage: ![[owlbear.png]]\nlink: [[Greyhaven]]\naliases: [Bear]\n---\nText")
    assert ({"image": "![[owlbear.png]]", "link": "[[Greyhaven]]", "aliases": ["Bear"]}, []) == (fm, warnings)


def test_comments_are_stripped_from_names():
    note = parse("npcs/Duke.md", "---\ntitle: The Duke %%the traitor%%\naliases: [Aldric, '%%Lord Vesper%%']\n---\nText.")
    assert ("The Duke", ("Aldric",)) == (note.title, note.aliases)


# -- Passages -------------------------------------------------------------------------------------


def test_an_html_comment_is_hidden():
    assert ("One  two.\n\n\nthree", [(1, 1, "HTML comment"), (2, 3, "HTML comment")]) == hidden(
        "One <!-- secret --> two.\n<!--\nthe heir lives -->\nthree"
    )


def test_an_unclosed_html_comment_hides_the_rest_with_a_warning():
    public, secrets, warnings = extract_secrets("one\n<!-- the rest\nis mine")
    assert ("one\n\n", ["line 2: an HTML comment is never closed; the rest of the note is treated as secret"]) == (
        public, warnings)


def test_an_html_comment_in_code_is_literal():
    text = "Use `<!-- x -->` here.\n\n```\n<!-- y -->\n```"
    assert (text, []) == hidden(text)


@pytest.mark.parametrize(
    "head", ["[!gm|right]", "[!secret|wide]+", "[!secrets]", "[!gm-only]", "[!dm-notes]", "[!spoiler]-", "[!hidden]"]
)
def test_callouts_of_a_gm_type_are_hidden(head):
    public, secrets = hidden(f"before\n> {head} Title\n> the heir lives\n\nafter")
    assert "heir" not in public and "before" in public and "after" in public
    assert [(2, 3)] == [s[:2] for s in secrets]


@pytest.mark.parametrize("head", ["[!info]- DM's Note", "[!info|right] Secrets", "[!warning] Spoiler warning!", "[!admonition]"])
def test_a_callout_title_is_not_its_type(head):
    text = f"> {head}\n> the wizard does not know it"
    assert (text, []) == hidden(text)


def test_an_admonition_of_a_gm_type_is_hidden_and_others_are_not():
    text = "```ad-secret\ntitle: Truth\nThe heir lives.\n```\n\n```ad-note\nA public note.\n```"
    assert ("\n\n\n\n\n```ad-note\nA public note.\n```", [(1, 4, "Admonition block ad-secret")]) == hidden(text)


def test_a_gm_heading_hides_its_section_down_to_the_next_heading_of_its_level():
    text = (
        "# Session 37\n## Recap\nWe met.\n## Prep\n### 2. Strong Start\nAmbush.\n### 4. Secrets and Clues\n"
        "The heir.\n## Notes\nWe fought.\n### Spoilers\nThe cook.\n# After\nEnd."
    )
    public, secrets = hidden(text)
    assert "# Session 37\n## Recap\nWe met.\n\n\n\n\n\n## Notes\nWe fought.\n\n\n# After\nEnd." == public
    assert [(4, 8, "section under the heading 'Prep'"), (11, 12, "section under the heading 'Spoilers'")] == secrets


@pytest.mark.parametrize("heading", ["## GM Notes", "## DM Only", "### Secrets and Clues", "## DM Notes: Pointing to the island",
                                     "## **Secrets**", "\nSecrets\n---"])
def test_gm_headings(heading):
    public, _ = hidden(f"Intro.\n{heading}\nThe heir lives.\n# Next\nOutro.")
    assert "heir" not in public and "Intro." in public and "Outro." in public


def test_the_gm_headings_are_a_setting():
    public, _, _ = extract_secrets("## History\nShe conspired.\n## Looks\nTall.", Policy(gm_headings=("History",)).marks)
    assert "conspired" not in public and "Tall." in public


@pytest.mark.parametrize("heading", ["## Session 12 — Secrets of the Deep", "## The Secret Door", "### Part II"])
def test_headings_that_only_mention_a_word_stay_public(heading):
    text = f"{heading}\nThe party went in."
    assert (text, []) == hidden(text)


def test_dataview_fields_of_a_gm_key_are_hidden():
    text = "Mood:: calm\nsecret:: the heir lives\n- gm notes:: the cook\nAn inn [gm:: haunted] and (dm:: cursed) here."
    public, secrets = hidden(text)
    assert "Mood:: calm\n\n- \nAn inn  and  here." == public
    assert 4 == len(secrets) and all(s[2].startswith("Dataview field") for s in secrets)


def test_tags_hide_their_paragraph_or_list_item():
    text = "Public one.\n\nThe heir lives. #gm\nstill the paragraph\n\n- bread\n- the duke lies #secret\n  - sub item\n- rope\n\nEnd #dmg"
    public, secrets = hidden(text)
    assert "heir" not in public and "paragraph" not in public and "duke" not in public and "sub item" not in public
    assert "Public one." in public and "bread" in public and "rope" in public and "End #dmg" in public
    assert ["tag #gm", "tag #secret"] == [s[2] for s in secrets]


def test_a_tag_on_a_heading_hides_its_section():
    public, _ = hidden("## Plot #dm-only\nThe heir.\n## Open\nPublic.")
    assert "heir" not in public and "Public." in public


def test_tags_in_code_and_links_are_not_tags():
    text = "See `#gm` and http://example.com/#secret and [[Note#Secrets]]."
    assert (text, []) == hidden(text)


# -- Embeds ---------------------------------------------------------------------------------------


def vault_of(files, policy=POLICY):
    return Vault({k: v.encode() for k, v in files.items()}, policy)


ITEM = "# The Ember Blade\n## Handout\nA blade that hums near fire.\n## Secrets\nIt holds the heir's soul.\n## Price\n300 gp"


def test_an_embed_publishes_its_section_and_nothing_more():
    files = {"Items/Ember Blade.md": ITEM, "Handouts/Blade.md": "Found:\n![[Ember Blade#Handout]]\nThe end."}
    note = parse("Handouts/Blade.md", files["Handouts/Blade.md"], POLICY, vault_of(files))
    assert (PUBLIC, "Found:\nHandout A blade that hums near fire.\nThe end.") == (note.visibility, note.text)


def test_an_embedded_section_keeps_its_own_secrets_hidden():
    item = "## Handout\nA blade. %% cursed %%\n> [!gm]\n> soul inside\n\nHums.\n## Other\nx"
    files = {"Items/Blade.md": item, "Handouts/Blade.md": "![[Items/Blade#Handout]]"}
    note = parse("Handouts/Blade.md", files["Handouts/Blade.md"], POLICY, vault_of(files))
    assert "Handout A blade. Hums." == note.text


@pytest.mark.parametrize(
    "target",
    ["gm/Plot twist", "Plot twist", "Ember Blade#Secrets", "Marked#Handout", "TODO", "Missing note", "map.png"],
)
@pytest.mark.parametrize("policy", [Policy(), Policy(player_notes=("Handouts",), gm_notes=("TODO.md",))])
def test_an_embed_of_gm_material_renders_as_nothing(target, policy):
    files = {
        "gm/Plot twist.md": "The heir lives.", "Items/Ember Blade.md": ITEM, "TODO.md": "Betrayal.",
        "Items/Marked.md": "---\nprivate: true\n---\n## Handout\nA note.", "Handouts/H.md": f"Before ![[{target}]] after.",
    }
    note = parse("Handouts/H.md", files["Handouts/H.md"], policy, vault_of(files, policy))
    assert "Before  after." == note.text


def test_embeds_of_blocks_whole_notes_and_markdown_links():
    files = {
        "days/Day 1.md": "Cold.\n\nRain all day. ^weather\n\nOther.",
        "npcs/Volo.md": "A writer.",
        "sessions/2022-05-08.md": "![](../days/Day%201.md#^weather)\n![[Volo]]\n![[map.png|The city map]]\n![[map.png|300]]",
    }
    note = parse("sessions/2022-05-08.md", files["sessions/2022-05-08.md"], Policy(), vault_of(files, Policy()))
    assert "Rain all day.\nA writer.\nThe city map\n" == note.text


def test_embed_cycles_end():
    files = {"A.md": "A says ![[B]]", "B.md": "B says ![[A]]"}
    assert "A says B says" == parse("A.md", files["A.md"], Policy(), vault_of(files, Policy())).text


def test_an_embed_without_the_vault_shows_nothing():
    assert "Before  after." == parse("Handouts/H.md", "Before ![[gm/Plot twist]] after.").text


def test_a_note_depends_on_what_it_embeds():
    files = {"A.md": "![[B#x]]", "B.md": "![[C]]", "C.md": "c", "D.md": "d"}
    assert ["B.md", "C.md"] == vault_of(files, Policy()).dependencies("A.md")


@pytest.mark.parametrize(
    "heading, word",
    [("## Prep work TODO", "prep"), ("### GM Tips", "gm"), ("## Notes for the Game Master", "game master"),
     ("## Spoilers ahead", "spoilers")],
)
def test_a_heading_whose_words_are_the_game_masters_hides_its_section(heading, word):
    assert word == Policy().marks.heading(heading.lstrip("# "))
    public, secrets = hidden(f"## Notes\nWe reached the arena.\n{heading}\nThe Sea Wolf is the spy.\n## Aftermath\nTato wins.")
    assert "Sea Wolf" not in public and "Tato wins." in public
    assert [(3, 4)] == [(a, b) for a, b, _ in secrets] and heading.lstrip("# ") in secrets[0][2]


@pytest.mark.parametrize(
    "heading",
    ["## The Secret Door", "## Planning the Heist", "# Cancer chemoprevention: there is still much to do",
     "## Hidden Valley"],
)
def test_words_that_also_tell_stories_do_not_hide_a_heading(heading):
    public, secrets = hidden(f"{heading}\nThe party found the way in.")
    assert ("The party found the way in." in public, []) == (True, secrets)
