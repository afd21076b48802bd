"""Fake secrets in the shapes agents meet them, and ordinary texts that only look like secrets.

Shared by ``benchmarks/redaction.py`` (recall and false positives) and the test that greps every
file contextfold writes (``tests/test_no_secret_at_rest.py``). Every secret is generated from a
seeded ``random.Random``: the right shape (prefix, length, alphabet, checksum-free), random
content, never a real credential. Nothing here is committed but the generators.

- :func:`secret_samples`: for each of :data:`FORMATS` (one generator per secret format), texts as
  a tool, a config file or a user would show them (``cat ~/.aws/credentials``, ``env``, a
  ``.env`` file, a connection string, a header), each naming the secret(s) it holds.
- the ordinary texts it is judged against are in :mod:`benchmarks.ordinary_texts`.
- :func:`leaks`: what of a secret survives in a text (the whole value or a distinctive fragment).
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["FORMATS", "Secret", "SecretSample", "every_secret", "leaks", "secret_samples"]

FRAGMENT_CHARS = 12
"""A distinctive fragment: this many characters of a secret's random body."""
FRAGMENT_LINES = 5
"""Lines of a multi-line body (a key) that fragments are taken from, spread over it."""

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
PASSWORD_CHARS = ALNUM + "!#%^*()_-+=~."


@dataclass(frozen=True)
class Secret:
    """A secret a text holds: ``value`` must never survive redaction, nor any fragment of
    ``body`` (its random part: ``value`` less a public prefix, or a key's base64 lines)."""

    value: str
    body: str = ""

    def fragments(self) -> list[str]:
        """Distinctive pieces of the body: the start, middle and end of lines at least
        :data:`FRAGMENT_CHARS` long (of a key's body: its first, last and three lines between);
        the whole body when no line is that long."""
        body = self.body or self.value
        lines = [line for line in body.split() if len(line) >= FRAGMENT_CHARS]
        if not lines:
            return [body]
        if len(lines) > FRAGMENT_LINES:
            step = (len(lines) - 1) / (FRAGMENT_LINES - 1)
            lines = [lines[round(i * step)] for i in range(FRAGMENT_LINES)]
        out: list[str] = []
        for line in lines:
            middle = (len(line) - FRAGMENT_CHARS) // 2
            for start in (0, middle, len(line) - FRAGMENT_CHARS):
                out.append(line[start : start + FRAGMENT_CHARS])
        return list(dict.fromkeys(out))


@dataclass(frozen=True)
class SecretSample:
    """One text of the corpus: its format and the secrets it holds."""

    format: str
    text: str
    secrets: tuple[Secret, ...]


def leaks(secret: Secret, text: str) -> str | None:
    """What of ``secret`` survives in ``text`` (its value or a fragment of its body), or None."""
    if secret.value in text:
        return secret.value
    return next((piece for piece in secret.fragments() if piece in text), None)


# -- random material -------------------------------------------------------------------------------


def random_chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """Random characters from ``alphabet`` holding at least a digit, a lower and an upper case
    letter when the alphabet has them (real tokens nearly always do at these lengths)."""
    while True:
        value = random_chars(rng, alphabet, n)
        needs = [set(string.digits), set(string.ascii_lowercase), set(string.ascii_uppercase)]
        if all(not (need & set(alphabet)) or (need & set(value)) for need in needs):
            return value


def _password(rng: random.Random) -> str:
    """A strong password: letters, digits and symbols that need no quoting in a URL's userinfo."""
    return _mixed(rng, rng.randint(12, 24), ALNUM + "!*()_-~.") + rng.choice(string.digits)


def b64_lines(rng: random.Random, size: int, width: int = 64, lead: bytes = b"") -> list[str]:
    data = base64.b64encode(lead + rng.randbytes(size)).decode()
    return [data[i : i + width] for i in range(0, len(data), width)]


def _user(rng: random.Random) -> str:
    return rng.choice(["app", "admin", "deploy", "svc_api", "root", "ci-bot", "analytics"])


def _host(rng: random.Random) -> str:
    return rng.choice(["db.internal", "10.0.3.17", "prod-db-1.example.net", "localhost"])


# -- the formats -----------------------------------------------------------------------------------

FORMATS: dict[str, Callable[[random.Random], SecretSample]] = {}
"""Every secret format of the corpus: name -> generator of one sample."""


def _format(name: str) -> Callable[[Callable[[random.Random], tuple[str, list[Secret]]]], None]:
    def register(make: Callable[[random.Random], tuple[str, list[Secret]]]) -> None:
        def sample(rng: random.Random) -> SecretSample:
            text, secrets = make(rng)
            return SecretSample(name, text, tuple(secrets))

        FORMATS[name] = sample

    return register


def _prefixed(name: str, prefix: str, length: int, alphabet: str = ALNUM, suffix: str = "") -> None:
    """A token made of a public ``prefix`` and a random body, shown in one of a few contexts."""
    contexts = (
        "{env}={token}",
        "$ env | grep -i key\n{env}={token}\nHOME=/home/dev",
        'config = {{"api_key": "{token}", "timeout": 30}}',
        "export {env}='{token}'",
        "Using credential {token} for the upload",
        'curl -s -H "Authorization: Bearer {token}" https://api.example.com/v1/me',
    )
    env = name.upper().replace("-", "_")

    @_format(name)
    def make(rng: random.Random) -> tuple[str, list[Secret]]:
        body = _mixed(rng, length, alphabet) + suffix
        token = prefix + body
        text = rng.choice(contexts).format(env=env, token=token)
        return text, [Secret(token, body)]


# Vendor tokens with a recognisable prefix.
_prefixed("openai-project-key", "sk-proj-", 156, B64URL)
_prefixed("openai-legacy-key", "sk-", 48)
_prefixed("openai-service-account-key", "sk-svcacct-", 120, B64URL)
_prefixed("openai-admin-key", "sk-admin-", 100, B64URL)
_prefixed("anthropic-api-key", "sk-ant-api03-", 93, B64URL, "AA")
_prefixed("anthropic-admin-key", "sk-ant-admin01-", 93, B64URL, "AA")
_prefixed("openrouter-key", "sk-or-v1-", 64, HEX)
_prefixed("deepseek-key", "sk-", 32, HEX)
_prefixed("stripe-secret-key", "sk_live_", 99)
_prefixed("stripe-restricted-key", "rk_live_", 99)
_prefixed("stripe-test-key", "sk_test_", 99)
_prefixed("stripe-webhook-secret", "whsec_", 32)
_prefixed("gitlab-pat", "glpat-", 20, B64URL)
_prefixed("gitlab-deploy-token", "gldt-", 20, B64URL)
_prefixed("gitlab-runner-token", "glrt-", 20, B64URL)
_prefixed("huggingface-token", "hf_", 34, string.ascii_letters)
_prefixed("npm-token", "npm_", 36)
_prefixed("github-pat-classic", "ghp_", 36)
_prefixed("github-oauth-token", "gho_", 36)
_prefixed("github-user-token", "ghu_", 36)
_prefixed("github-server-token", "ghs_", 36)
_prefixed("github-refresh-token", "ghr_", 76)
_prefixed("github-fine-grained-pat", "github_pat_", 82, ALNUM + "_")
_prefixed("google-api-key", "AIza", 35, B64URL)
_prefixed("google-oauth-client-secret", "GOCSPX-", 28, B64URL)
_prefixed("google-oauth-access-token", "ya29.", 120, B64URL)
_prefixed("slack-bot-token", "xoxb-", 50, ALNUM + "-")
_prefixed("slack-user-token", "xoxp-", 70, ALNUM + "-")
_prefixed("pypi-token", "pypi-AgEIcHlwaS5vcmc", 140, B64URL)
_prefixed("shopify-access-token", "shpat_", 32, HEX)
_prefixed("digitalocean-token", "dop_v1_", 64, HEX)
_prefixed("vault-token", "hvs.", 90, B64URL)
_prefixed("groq-key", "gsk_", 52)
_prefixed("xai-key", "xai-", 80)
_prefixed("replicate-token", "r8_", 37)
_prefixed("perplexity-key", "pplx-", 48)
_prefixed("linear-key", "lin_api_", 40)
_prefixed("notion-token", "ntn_", 46)
_prefixed("grafana-service-account-token", "glsa_", 32, ALNUM, "_0a1b2c3d")
_prefixed("supabase-token", "sbp_", 40, HEX)
_prefixed("doppler-token", "dp.st.", 43)
_prefixed("new-relic-key", "NRAK-", 27, UPPER_DIGITS)
_prefixed("square-access-token", "sq0atp-", 22, B64URL)
_prefixed("sentry-auth-token", "sntrys_", 120, ALNUM)
_prefixed("age-secret-key", "AGE-SECRET-KEY-1", 58, UPPER_DIGITS)


@_format("aws-access-key-id")
def _aws_key_id(rng: random.Random) -> tuple[str, list[Secret]]:
    body = random_chars(rng, UPPER_DIGITS, 16)
    key_id = "AKIA" + body
    text = (
        f"$ aws configure list\n      Name   Value\n access_key   {key_id} shared-credentials-file"
    )
    return text, [Secret(key_id, body)]


def _aws_secret_key(rng: random.Random) -> str:
    return _mixed(rng, 40, B64)


def _aws_session_token(rng: random.Random) -> str:
    return "IQoJb3JpZ2luX2VjE" + _mixed(rng, rng.randint(300, 420), B64) + "=="


@_format("aws-credentials-file")
def _aws_credentials(rng: random.Random) -> tuple[str, list[Secret]]:
    key_id = "ASIA" + random_chars(rng, UPPER_DIGITS, 16)
    secret, token = _aws_secret_key(rng), _aws_session_token(rng)
    text = (
        "$ cat ~/.aws/credentials\n[default]\n"
        f"aws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"
        f"aws_session_token = {token}\nregion = eu-west-1\n"
    )
    return text, [Secret(key_id, key_id[4:]), Secret(secret), Secret(token, token[17:])]


@_format("aws-env")
def _aws_env(rng: random.Random) -> tuple[str, list[Secret]]:
    secret, token = _aws_secret_key(rng), _aws_session_token(rng)
    text = (
        "$ env | sort\nAWS_DEFAULT_REGION=us-east-1\n"
        f"AWS_SECRET_ACCESS_KEY={secret}\nAWS_SESSION_TOKEN={token}\nHOME=/root"
    )
    return text, [Secret(secret), Secret(token, token[17:])]


@_format("aws-sts-json")
def _aws_sts(rng: random.Random) -> tuple[str, list[Secret]]:
    secret, token = _aws_secret_key(rng), _aws_session_token(rng)
    document = {
        "Credentials": {
            "AccessKeyId": "ASIA" + random_chars(rng, UPPER_DIGITS, 16),
            "SecretAccessKey": secret,
            "SessionToken": token,
            "Expiration": "2025-06-01T12:00:00+00:00",
        }
    }
    text = "$ aws sts get-session-token\n" + json.dumps(document, indent=4)
    return text, [Secret(secret), Secret(token, token[17:])]


@_format("aws-credentials-csv")
def _aws_csv(rng: random.Random) -> tuple[str, list[Secret]]:
    key_id, secret = "AKIA" + random_chars(rng, UPPER_DIGITS, 16), _aws_secret_key(rng)
    text = (
        f"$ cat ~/Downloads/ci_accessKeys.csv\nAccess key ID,Secret access key\n{key_id},{secret}\n"
    )
    return text, [Secret(key_id, key_id[4:]), Secret(secret)]


def _url_format(name: str, template: str) -> None:
    @_format(name)
    def make(rng: random.Random) -> tuple[str, list[Secret]]:
        password = _password(rng)
        text = template.format(user=_user(rng), password=password, host=_host(rng))
        return text, [Secret(password)]


_url_format("postgresql-url", "DATABASE_URL=postgresql://{user}:{password}@{host}:5432/orders")
_url_format(
    "postgres-url-psql", 'psql "postgres://{user}:{password}@{host}/app?sslmode=require" -c "\\dt"'
)
_url_format(
    "sqlalchemy-url", 'engine = create_engine("postgresql+psycopg2://{user}:{password}@{host}/app")'
)
_url_format("mysql-url", "Connecting to mysql://{user}:{password}@{host}:3306/shop ... ok")
_url_format("mongodb-url", "MONGO_URI=mongodb://{user}:{password}@{host}:27017/?authSource=admin")
_url_format(
    "mongodb-srv-url",
    'client = MongoClient("mongodb+srv://{user}:{password}@cluster0.x1y2z.net/db")',
)
_url_format("redis-url", "REDIS_URL=rediss://default:{password}@{host}:6380/0")
_url_format("amqp-url", "celery worker --broker amqp://{user}:{password}@{host}:5672/vhost")
_url_format("basic-auth-url", "$ curl https://{user}:{password}@registry.example.com/v2/_catalog")
_url_format(
    "git-credentials", "$ cat ~/.git-credentials\nhttps://{user}:{password}@git.example.com\n"
)
_url_format(
    "jdbc-url",
    "spring.datasource.url=jdbc:postgresql://{host}:5432/app?user={user}&password={password}",
)
_url_format("libpq-dsn", 'conn = psycopg.connect("host={host} user={user} password={password}")')
_url_format("env-password", "DB_USER={user}\nDB_PASSWORD={password}\nDB_HOST={host}")
_url_format("env-pgpassword", "$ PGPASSWORD={password} psql -h {host} -U {user} app")
_url_format("env-mysql-pwd", "MYSQL_PWD={password} mysqldump -h {host} -u {user} shop > dump.sql")
_url_format("yaml-password", "database:\n  host: {host}\n  user: {user}\n  password: {password}\n")
_url_format("json-password", '{{"username": "{user}", "password": "{password}", "host": "{host}"}}')
_url_format("mysql-cli-password", "$ mysql -h {host} -u {user} -p{password} shop -e 'select 1'")
_url_format("curl-user", "$ curl -u {user}:{password} https://jenkins.example.com/api/json")
_url_format("docker-login", "$ docker login -u {user} --password {password} registry.example.com")
_url_format(
    "netrc", "$ cat ~/.netrc\nmachine api.example.com\n  login {user}\n  password {password}\n"
)
_url_format(
    "python-password-literal",
    'smtp.login("{user}@example.com", password="{password}")  # TODO move to vault',
)


def _env_format(name: str, variable: str, alphabet: str, length: int, quote: str = "") -> None:
    @_format(name)
    def make(rng: random.Random) -> tuple[str, list[Secret]]:
        value = _mixed(rng, length, alphabet)
        line = f"{variable}={quote}{value}{quote}"
        text = rng.choice(
            [f"$ cat .env\nNODE_ENV=production\n{line}\nPORT=8080", f"export {line}", line]
        )
        return text, [Secret(value)]


_env_format("env-secret", "JWT_SECRET", B64URL, 48)
_env_format("env-token", "API_TOKEN", ALNUM, 40)
_env_format("env-key", "ENCRYPTION_KEY", B64, 44, '"')
_env_format("env-client-secret", "OAUTH_CLIENT_SECRET", B64URL, 32, "'")
_env_format("datadog-api-key", "DD_API_KEY", HEX, 32)
_env_format("twilio-auth-token", "TWILIO_AUTH_TOKEN", HEX, 32)
_env_format("azure-openai-key", "AZURE_OPENAI_API_KEY", HEX, 32)
_env_format("cloudflare-api-token", "CLOUDFLARE_API_TOKEN", B64URL, 40)
_env_format("databricks-token", "DATABRICKS_TOKEN", HEX, 32)
_env_format("mistral-key", "MISTRAL_API_KEY", ALNUM, 32)


@_format("heroku-api-key")
def _heroku(rng: random.Random) -> tuple[str, list[Secret]]:
    value = "-".join(random_chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))
    return f"HEROKU_API_KEY={value}", [Secret(value)]


@_format("django-secret-key")
def _django(rng: random.Random) -> tuple[str, list[Secret]]:
    value = "django-insecure-" + _mixed(rng, 50, ALNUM + "!@#%^&*(-_=+)")
    return f"# settings.py\nDEBUG = False\nSECRET_KEY = '{value}'\n", [Secret(value, value[16:])]


@_format("sendgrid-key")
def _sendgrid(rng: random.Random) -> tuple[str, list[Secret]]:
    body = _mixed(rng, 22, B64URL) + "." + _mixed(rng, 43, B64URL)
    return f"sg = SendGridAPIClient('SG.{body}')", [Secret("SG." + body, body)]


@_format("twilio-api-key")
def _twilio(rng: random.Random) -> tuple[str, list[Secret]]:
    body = random_chars(rng, HEX, 32)
    return f"client = Client('SK{body}', api_secret, account_sid)", [Secret("SK" + body, body)]


@_format("azure-storage-connection-string")
def _azure(rng: random.Random) -> tuple[str, list[Secret]]:
    key = base64.b64encode(rng.randbytes(64)).decode()
    text = (
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=prodlogs;"
        f"AccountKey={key};EndpointSuffix=core.windows.net"
    )
    return text, [Secret(key)]


@_format("azure-sas-url")
def _azure_sas(rng: random.Random) -> tuple[str, list[Secret]]:
    sig = base64.b64encode(rng.randbytes(32)).decode().replace("+", "%2B").replace("/", "%2F")
    sig = sig.replace("=", "%3D")
    text = (
        "https://prodlogs.blob.core.windows.net/exports/2024.csv?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2025-01-01T00:00:00Z&spr=https&sig={sig}"
    )
    return text, [Secret(sig)]


@_format("slack-app-token")
def _slack_app(rng: random.Random) -> tuple[str, list[Secret]]:
    body = f"{random_chars(rng, UPPER_DIGITS, 11)}-{random_chars(rng, string.digits, 13)}-"
    body += random_chars(rng, HEX, 64)
    return f"SLACK_APP_TOKEN=xapp-1-{body}", [Secret("xapp-1-" + body, body)]


@_format("slack-webhook")
def _slack_webhook(rng: random.Random) -> tuple[str, list[Secret]]:
    team, channel = random_chars(rng, UPPER_DIGITS, 8), random_chars(rng, UPPER_DIGITS, 10)
    path = f"T{team}/B{channel}/{_mixed(rng, 24)}"
    url = f"https://hooks.slack.com/services/{path}"
    return f"$ curl -X POST -d @msg.json {url}", [Secret(url, path)]


@_format("discord-webhook")
def _discord(rng: random.Random) -> tuple[str, list[Secret]]:
    token = _mixed(rng, 68, B64URL)
    url = f"https://discord.com/api/webhooks/{random_chars(rng, string.digits, 18)}/{token}"
    return f"WEBHOOK = '{url}'", [Secret(token)]


@_format("telegram-bot-token")
def _telegram(rng: random.Random) -> tuple[str, list[Secret]]:
    body = "AA" + _mixed(rng, 33, B64URL)
    token = f"{random_chars(rng, string.digits, 10)}:{body}"
    return f"bot = telebot.TeleBot('{token}')", [Secret(token, body)]


@_format("mailchimp-key")
def _mailchimp(rng: random.Random) -> tuple[str, list[Secret]]:
    body = random_chars(rng, HEX, 32)
    return f"mc.set_config({{'api_key': '{body}-us21'}})", [Secret(body + "-us21", body)]


@_format("postman-key")
def _postman(rng: random.Random) -> tuple[str, list[Secret]]:
    body = f"{random_chars(rng, HEX, 24)}-{random_chars(rng, HEX, 34)}"
    return f"x-api-key: PMAK-{body}", [Secret("PMAK-" + body, body)]


@_format("mapbox-secret-token")
def _mapbox(rng: random.Random) -> tuple[str, list[Secret]]:
    payload = base64.urlsafe_b64encode(b'{"u":"dev","a":"' + rng.randbytes(9).hex().encode())
    body = payload.decode().rstrip("=") + "." + _mixed(rng, 22, B64URL)
    return f"MAPBOX_DOWNLOADS=sk.{body}", [Secret("sk." + body, body)]


def _jwt(rng: random.Random) -> tuple[str, str]:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = {"sub": random_chars(rng, string.digits, 8), "role": "admin", "exp": 1900000000}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    signature = _mixed(rng, 43, B64URL)
    return f"{header}.{payload}.{signature}", signature


@_format("jwt")
def _jwt_format(rng: random.Random) -> tuple[str, list[Secret]]:
    token, signature = _jwt(rng)
    text = rng.choice(
        [f"id_token: {token}", f"Set-Cookie: session={token}; HttpOnly", f"jwt decode {token}"]
    )
    return text, [Secret(token, token.split(".")[1] + " " + signature)]


@_format("bearer-header")
def _bearer(rng: random.Random) -> tuple[str, list[Secret]]:
    token = _mixed(rng, 40, B64URL)
    return f"> GET /v2/items HTTP/1.1\n> Authorization: Bearer {token}\n", [Secret(token)]


@_format("basic-auth-header")
def _basic(rng: random.Random) -> tuple[str, list[Secret]]:
    credentials = base64.b64encode(f"{_user(rng)}:{_password(rng)}".encode()).decode()
    return f'curl -H "Authorization: Basic {credentials}" {_host(rng)}', [Secret(credentials)]


@_format("api-key-header")
def _api_key_header(rng: random.Random) -> tuple[str, list[Secret]]:
    token = _mixed(rng, 32)
    return f"requests.get(url, headers={{'X-API-Key': '{token}'}})", [Secret(token)]


@_format("docker-config-auth")
def _docker(rng: random.Random) -> tuple[str, list[Secret]]:
    auth = base64.b64encode(f"{_user(rng)}:{_password(rng)}".encode()).decode()
    document = {"auths": {"registry.example.com": {"auth": auth}}}
    return "$ cat ~/.docker/config.json\n" + json.dumps(document, indent=2), [Secret(auth)]


@_format("npmrc-auth-token")
def _npmrc(rng: random.Random) -> tuple[str, list[Secret]]:
    token = "-".join(random_chars(rng, HEX, n) for n in (8, 4, 4, 4, 12))
    text = f"$ cat ~/.npmrc\n//npm.pkg.example.com/:_authToken={token}\nalways-auth=true"
    return text, [Secret(token)]


@_format("kubeconfig-token")
def _kube_token(rng: random.Random) -> tuple[str, list[Secret]]:
    token = _mixed(rng, 64, LOWER_DIGITS)
    text = f"users:\n- name: ci\n  user:\n    token: {token}\n"
    return text, [Secret(token)]


# -- private keys ----------------------------------------------------------------------------------

_KEY_KINDS = {
    "pem-rsa-private-key": ("RSA PRIVATE KEY", b"\x30\x82\x04\xa4\x02\x01\x00\x02\x82\x01\x01", 64),
    "pem-ec-private-key": ("EC PRIVATE KEY", b"\x30\x77\x02\x01\x01\x04\x20", 64),
    "pem-pkcs8-private-key": ("PRIVATE KEY", b"\x30\x82\x04\xbe\x02\x01\x00\x30\x0d", 64),
    "pem-encrypted-private-key": ("ENCRYPTED PRIVATE KEY", b"\x30\x82\x05\x0e\x30\x40", 64),
    "pem-openssh-private-key": ("OPENSSH PRIVATE KEY", b"openssh-key-v1\x00", 70),
    "pem-pgp-private-key": ("PGP PRIVATE KEY BLOCK", b"\x95\x07\x46\x04", 64),
}


def _key_block(rng: random.Random, label: str, lead: bytes, width: int) -> tuple[str, str]:
    lines = b64_lines(rng, rng.randint(300, 1200), width, lead)
    body = "\n".join(lines)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def _key_format(name: str, label: str, lead: bytes, width: int) -> None:
    @_format(name)
    def make(rng: random.Random) -> tuple[str, list[Secret]]:
        block, body = _key_block(rng, label, lead, width)
        text = rng.choice(["$ cat ~/.ssh/id_key\n{}\n", "key = '''{}'''", "{}"]).format(block)
        return text, [Secret(block, body)]


for _name, (_label, _lead, _width) in _KEY_KINDS.items():
    _key_format(_name, _label, _lead, _width)


@_format("pem-begin-line-cut")
def _pem_cut_begin(rng: random.Random) -> tuple[str, list[Secret]]:
    block, _ = _key_block(rng, "RSA PRIVATE KEY", b"\x30\x82", 64)
    cut = rng.randint(len("-----BEGIN RSA PRIVATE KEY-----") + 10, len(block) // 2)
    tail = block[cut:]
    text = f"[... output cut: 31 lines above ...]\n{tail}\n$ "
    kept = tail[: tail.index("-----END")].strip()
    return text, [Secret(kept, kept)]


@_format("pem-end-line-cut")
def _pem_cut_end(rng: random.Random) -> tuple[str, list[Secret]]:
    block, _ = _key_block(rng, "EC PRIVATE KEY", b"\x30\x77", 64)
    cut = rng.randint(len(block) // 2, len(block) - 40)
    head = block[:cut]
    kept = head[head.index("\n") + 1 :]
    return f"$ head -c {cut} server.key\n{head}", [Secret(head, kept)]


@_format("gcp-service-account-json")
def _gcp(rng: random.Random) -> tuple[str, list[Secret]]:
    block, body = _key_block(rng, "PRIVATE KEY", b"\x30\x82\x04\xbe", 64)
    document = {
        "type": "service_account",
        "project_id": "prod-analytics-4411",
        "private_key_id": random_chars(rng, HEX, 40),
        "private_key": block + "\n",
        "client_email": "etl@prod-analytics-4411.iam.gserviceaccount.com",
        "client_id": random_chars(rng, string.digits, 21),
    }
    text = "$ cat sa.json\n" + json.dumps(document, indent=2)
    return text, [Secret(block.replace("\n", "\\n"), body)]


@_format("kubeconfig-client-key")
def _kube_key(rng: random.Random) -> tuple[str, list[Secret]]:
    block, _ = _key_block(rng, "RSA PRIVATE KEY", b"\x30\x82", 64)
    data = base64.b64encode((block + "\n").encode()).decode()
    text = f"users:\n- name: admin\n  user:\n    client-key-data: {data}\n"
    return text, [Secret(data, data[40:])]


@_format("putty-private-key")
def _putty(rng: random.Random) -> tuple[str, list[Secret]]:
    private = b64_lines(rng, 600, 64)
    body = "\n".join(private)
    text = (
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 6\n"
        + "\n".join(b64_lines(rng, 270, 64))
        + f"\nPrivate-Lines: {len(private)}\n{body}\nPrivate-MAC: {random_chars(rng, HEX, 64)}\n"
    )
    return text, [Secret(body, body)]


def secret_samples(seed: int = 14, per_format: int = 10) -> list[SecretSample]:
    """``per_format`` samples of every format in :data:`FORMATS`, the same for the same seed."""
    rng = random.Random(seed)
    return [make(rng) for make in FORMATS.values() for _ in range(per_format)]


def every_secret(samples: list[SecretSample]) -> Iterator[tuple[SecretSample, Secret]]:
    """Each secret of ``samples`` with the sample that holds it."""
    for sample in samples:
        for secret in sample.secrets:
            yield sample, secret
