"""Tests of the fake API server (teapot_lb.lab.fakeapi), and the fixtures and waits the
other tests share (`fakeapi.fixtures`, `fakeapi.wait`)."""
