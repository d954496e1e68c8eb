from fakeapi.fixtures import fake_api, fake_api_options

__all__ = ["fake_api", "fake_api_options"]
