"""The read side: the RCP ``retrieve`` pipeline and its stages."""

from kgrag.rcp.params import RetrieveParams, parse_params

from .pipeline import Retriever

__all__ = ["RetrieveParams", "Retriever", "parse_params"]
