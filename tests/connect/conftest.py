import pytest


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server (local[2]) on 127.0.0.1 for the whole run,
    started with pyspark's sbin/start-connect-server.sh, stopped by PID."""
    from tests.servers import ConnectServer

    server = ConnectServer(str(tmp_path_factory.mktemp("connect-server"))).start()
    yield server
    server.stop()
