"""Helpers of the test suite: real servers and hosts it starts, fake run folders it writes."""
