"""Every campaign's index in one process, sharing what is safe to share.

Shared: the embedding model (loaded once), the embedding worker process (started once, for every
campaign's reingests), the Ollama client and the number of LLM calls allowed at once (one Ollama).
Never shared: a campaign's index (its own SQLite file and Chroma collections), hence its notes, its
secrets and its Compendium. At most one ingest per campaign runs at a time (the ingest lock in its
data folder, across processes too); ingests of different campaigns and questions to any campaign
run side by side.

    library = await Library.open(settings)            # campaigns from ORACLE_CAMPAIGNS, or the default one
    index = library.index("tuesday")                  # an `Index`: Oracle(index), ingest(index), ...
    ...
    await library.close()
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

from ..campaigns import Campaign, Campaigns
from ..llm import LLM
from ..offload import off_loop
from ..settings import Settings
from .embed import Embedder, EmbedError
from .index import Index, SharedModel, load_embedder
from .seam import Embeddings, search_concurrency
from .worker import EmbedWorker

log = logging.getLogger(__name__)


def model_settings(settings: Settings, campaigns: Campaigns) -> Settings:
    """The settings the shared model is loaded with: its question encoder is cached under the data
    folder of the one campaign (`--data` included), or under the data folder that holds every
    campaign's; never in the folder a command was started from."""
    only = list(campaigns)
    return only[0].settings(settings) if len(only) == 1 else settings


class Library:
    def __init__(
        self,
        settings: Settings,
        campaigns: Campaigns,
        embeddings: Embeddings | None = None,
        *,
        worker: EmbedWorker | None = None,
    ) -> None:
        """`Library.open` loads the model and starts the worker first; this wires parts already made
        (tests pass a loaded model). Without `embeddings`, the model is loaded on first use, once for
        every campaign (a command that may not need it: `oracle status`)."""
        self.settings = settings
        self.campaigns = campaigns
        self.embeddings = embeddings
        self.model = SharedModel(model_settings(settings, campaigns), embeddings)
        self.worker = worker
        self.llm = LLM.from_settings(settings)
        self.llm_slots = asyncio.Semaphore(settings.llm_concurrency)
        self.search_slots = asyncio.Semaphore(search_concurrency(settings))
        llms: dict[str, LLM] = {settings.model: self.llm}
        self._indexes: dict[str, Index] = {}
        for campaign in campaigns:
            own = campaign.settings(settings)
            if own.model not in llms:
                llms[own.model] = self.llm.for_model(own.model)
            llm = llms[own.model]
            self._indexes[campaign.name] = Index(
                own, embedder=self.model, llm=llm, llm_slots=self.llm_slots, search_slots=self.search_slots
            )

    @classmethod
    async def open(
        cls,
        settings: Settings,
        campaigns: Campaigns | None = None,
        *,
        embedder: Embedder | None = None,
        worker: bool | None = None,
    ) -> Library:
        """Load the model (or take `embedder`), start the embedding worker when `worker` (default:
        ORACLE_EMBED_WORKER) and open one index per campaign (`campaigns`, default: from `settings`).
        A bad campaigns file raises `CampaignsError` before anything is loaded."""
        campaigns = campaigns or Campaigns.from_settings(settings)
        use_worker = settings.embed_worker if worker is None else worker
        embed_worker = EmbedWorker(settings.embed_model, query_prompt=settings.embed_query_prompt,
                                   passage_prompt=settings.embed_passage_prompt) if use_worker else None
        if embed_worker is not None:
            embed_worker.start()  # its model loads while ours does
        try:
            if embedder is None:
                embedder = await off_loop(load_embedder, model_settings(settings, campaigns))
            if embed_worker is not None:
                fingerprint = await embed_worker.ready()
                if fingerprint != embedder.fingerprint:
                    raise EmbedError(
                        f"the embedding worker loaded another model ({fingerprint}, not {embedder.fingerprint})"
                    )
        except BaseException:
            if embed_worker is not None:
                await embed_worker.close()
            raise
        return cls(settings, campaigns, Embeddings(embedder, worker=embed_worker), worker=embed_worker)

    def __iter__(self) -> Iterator[Campaign]:
        return iter(self.campaigns)

    def __len__(self) -> int:
        return len(self.campaigns)

    def index(self, campaign: Campaign | str) -> Index:
        """The index of a campaign (by name, or the `Campaign` that `campaigns.route` gave)."""
        name = campaign if isinstance(campaign, str) else campaign.name
        if name not in self._indexes:
            self.campaigns.get(name)  # raises, listing the names
        return self._indexes[name]

    def indexes(self) -> dict[str, Index]:
        return dict(self._indexes)

    async def close(self) -> None:
        for index in self._indexes.values():
            await index.close()
        for llm in {id(i.llm): i.llm for i in self._indexes.values()}.values():
            if llm is not self.llm:
                await llm.close()
        await self.llm.close()
        if self.worker is not None:
            await self.worker.close()

    async def __aenter__(self) -> Library:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

