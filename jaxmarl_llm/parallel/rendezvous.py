"""Wait for every process of a group before jax.distributed joins them, so a missing process is one line.

jax.distributed.initialize waits for the whole group inside its coordination service and, when a process never
comes, aborts the interpreter from C++ after its timeout ("DEADLINE_EXCEEDED ... RegisterTask", 100 lines of stack,
no word of which process is missing). So the processes meet first on the coordinator's own port, in Python: process
0 listens there and each other process connects and says its index; once all are in, process 0 answers each
`go` and closes the port for jax's service to take. A process that does not come in time is named: process 0 says
which indices are missing, the others that process 0 did not answer.
"""

from __future__ import annotations

import socket
import time

from jaxmarl_llm.errors import ProcessGroupError

RETRY_S = 0.2  # between attempts to reach process 0, which may start later


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ProcessGroupError(f"JAXMARL_COORDINATOR={address!r}: expected host:port")
    return host.strip("[]"), int(port)


def rendezvous(address: str, num_processes: int, process_id: int, timeout_s: float) -> None:
    """Return once all `num_processes` processes have reached this call; ProcessGroupError (one line) if they do
    not within `timeout_s` seconds, naming the missing processes (on process 0) or the unreachable process 0."""
    if num_processes <= 1:
        return
    host, port = _host_port(address)
    if process_id == 0:
        _gather(address, port, num_processes, timeout_s)
    else:
        _join(address, host, port, num_processes, process_id, timeout_s)


def _missing_line(address: str, missing: list[int], num_processes: int, timeout_s: float) -> str:
    return (f"JAXMARL_COORDINATOR={address}: process{'es' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))} of {num_processes} did not join within {timeout_s:g} s; start each with "
            "the same command and its own JAXMARL_PROCESS_ID (or raise JAXMARL_JOIN_TIMEOUT_S)")


def _send(conn: socket.socket, text: str) -> None:
    try:
        conn.sendall(text.encode())
    except OSError:  # a process that gave up already says its own line
        pass


def _gather(address: str, port: int, num_processes: int, timeout_s: float) -> None:
    """Process 0: accept one connection per other process, then answer all of them `go`."""
    deadline = time.monotonic() + timeout_s
    peers: dict[int, socket.socket] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("", port))
        except OSError as err:
            raise ProcessGroupError(f"JAXMARL_COORDINATOR={address}: process 0 cannot listen on port {port} "
                                    f"({err.strerror}); choose a free port for the whole group") from None
        server.listen(num_processes)
        try:
            while len(peers) < num_processes - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [i for i in range(1, num_processes) if i not in peers]
                    for conn in peers.values():  # the processes that came say the same line
                        _send(conn, f"missing {','.join(map(str, missing))}\n")
                    raise ProcessGroupError(_missing_line(address, missing, num_processes, timeout_s))
                server.settimeout(left)
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    continue
                conn.settimeout(max(deadline - time.monotonic(), 1.0))
                try:
                    said = conn.recv(64).decode("ascii", "replace").strip()
                except OSError:
                    conn.close()
                    continue
                if not said.isdigit() or not 0 < int(said) < num_processes:
                    conn.close()  # not one of ours (a port scan, a process of another group size)
                    continue
                if int(said) in peers:
                    raise ProcessGroupError(f"JAXMARL_COORDINATOR={address}: two processes started with "
                                            f"JAXMARL_PROCESS_ID={said}; give each process its own index")
                peers[int(said)] = conn
            for conn in peers.values():
                _send(conn, "go\n")
        finally:
            for conn in peers.values():
                conn.close()


def _join(address: str, host: str, port: int, num_processes: int, process_id: int, timeout_s: float) -> None:
    """Process k > 0: reach process 0 (retrying while it has not started), say k, wait for `go`."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ProcessGroupError(f"JAXMARL_COORDINATOR={address}: process 0 did not answer process {process_id} "
                                    f"within {timeout_s:g} s; start process 0 on that host and port (or raise "
                                    "JAXMARL_JOIN_TIMEOUT_S)")
        try:
            with socket.create_connection((host, port), timeout=min(left, 5.0)) as conn:
                conn.sendall(f"{process_id}\n".encode())
                conn.settimeout(None)  # process 0 answers go, or who is missing at its own deadline
                said = conn.recv(4096).decode("ascii", "replace")
                if said.startswith("go"):
                    return
                if said.startswith("missing "):  # process 0 gave up waiting for others
                    missing = [int(i) for i in said.split()[1].split(",")]
                    raise ProcessGroupError(_missing_line(address, missing, num_processes, timeout_s))
        except socket.gaierror:
            raise ProcessGroupError(f"JAXMARL_COORDINATOR={address}: unknown host {host!r}") from None
        except OSError:  # refused (process 0 not listening yet), reset, or timed out waiting for the others
            pass
        time.sleep(RETRY_S)
