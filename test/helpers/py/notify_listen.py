"""Listens on a unix datagram socket as systemd does for sd_notify, printing each message.

File descriptors passed with a message (systemd-notify's BARRIER=1) are closed, which is what
releases the sender's barrier wait.
"""
import os
import socket
import sys

path = sys.argv[1]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
print("LISTENING", flush=True)
while True:
    msg, fds, _flags, _addr = socket.recv_fds(sock, 8192, 16)
    for fd in fds:
        os.close(fd)
    for line in msg.decode().split("\n"):
        if line:
            print(line, flush=True)
