"""Implementations of the ports that wrap heavy SDKs. Import the submodules directly."""
