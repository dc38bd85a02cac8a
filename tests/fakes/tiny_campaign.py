"""A tiny campaign with one GM secret, for fast adapter tests (hash embedder, memory store)."""

from __future__ import annotations

from pathlib import Path

CANARY = "the baron is secretly a drowned vampire"
GM_TITLE = "Baron Plot Secrets"
#: In a document only the GM and the personal lens "mirel" may read.
MIREL_CANARY = "mirel pawned the baron's ninth bell"
#: A Discord user given the "mirel" lens by id (campaign.toml ``discord_users``).
MIREL_USER = 666
SLACK_GM = "UGM00001"
SLACK_GM_GROUP = "S0GMGROUP"
SLACK_GM_HANDLE = "gms"

CAMPAIGN_TOML = f"""
name = "Greyhold"
lenses = ["mirel"]
gm_paths = ["gm/**"]

[roles.discord]
gm = ["GM"]
gm_users = ["111"]
[roles.slack]
gm_users = ["{SLACK_GM}"]
gm_usergroups = ["{SLACK_GM_GROUP}"]

[lens_members.mirel]
discord_roles = ["Mirel"]
discord_users = ["{MIREL_USER}"]
slack_users = ["UMIREL01"]

[recap]
cron = ""
channel = ""
"""


def make_tiny_campaign(campaigns_dir: Path, slug: str = "greyhold") -> Path:
    root = campaigns_dir / slug
    (root / "gm").mkdir(parents=True, exist_ok=True)
    (root / "sessions").mkdir(exist_ok=True)
    (root / "campaign.toml").write_text(CAMPAIGN_TOML, encoding="utf-8")
    (root / "baron.md").write_text(
        "---\ntitle: Baron Aldric\n---\n# Baron Aldric\n\nThe baron rules Greyhold keep from the river tower. "
        "The baron collects old bells and pays his guards in silver.\n",
        encoding="utf-8",
    )
    (root / "gm" / "plot.md").write_text(
        f"---\ntitle: {GM_TITLE}\n---\n# Baron plot\n\nThe truth about the baron: {CANARY}. "
        "The baron feeds in the river tower at night.\n",
        encoding="utf-8",
    )
    (root / "mirel.md").write_text(
        f"---\ntitle: Mirel's Past\nvisibility: [mirel]\n---\n# Mirel's past\n\nBefore Greyhold, {MIREL_CANARY}. "
        "The baron has never learned who took the bell.\n",
        encoding="utf-8",
    )
    (root / "sessions" / "session-01.md").write_text(
        "---\ntitle: Session 1\ntype: session\n---\n# Session 1\n\nThe party reached Greyhold keep at dusk. "
        "They met the baron in the river tower. He offered them silver for a bell.\n",
        encoding="utf-8",
    )
    return root
