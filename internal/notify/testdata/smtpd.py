"""A real SMTP server for the email channel's tests (Debian's python3-aiosmtpd).

usage: smtpd.py PORT CERT KEY USER PASSWORD

Listens on 127.0.0.1:PORT, offers STARTTLS with CERT/KEY and requires it,
requires AUTH (PLAIN or LOGIN) as USER/PASSWORD, and prints each message it
accepts as one JSON line on stdout. "ready" is printed once it listens.
"""
import json
import ssl
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, user, password = sys.argv[1:6]


class Handler:
    async def handle_DATA(self, server, session, envelope):
        print(json.dumps({
            "from": envelope.mail_from,
            "to": envelope.rcpt_tos,
            "data": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None,
            "auth": bool(session.authenticated),
        }), flush=True)
        return "250 OK"


def authenticate(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login == user.encode()
          and auth_data.password == password.encode())
    return AuthResult(success=ok)


tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
tls.load_cert_chain(cert, key)
controller = Controller(
    Handler(), hostname="127.0.0.1", port=int(port),
    tls_context=tls, require_starttls=True,
    authenticator=authenticate, auth_required=True,
)
controller.start()
print("ready", flush=True)
try:
    while True:
        time.sleep(3600)
finally:
    controller.stop()
