"""Secret formats an agent's session holds, each in the context it is met in.

Every sample is ``before + secret + after``: redaction must turn it into
``before + [REDACTED] + after`` exactly (``expected`` when a rule also
removes a part the sample counts as context). The secrets are generated
from a fixed seed, so no real-looking key is stored in the repository and
every run sees the same text.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def token(alphabet: str, length: int, seed: str) -> str:
    """``length`` characters of ``alphabet``, fixed by ``seed``, with at least
    one upper case letter, one lower case letter and one digit when the
    alphabet has them (real keys do)."""
    rnd = random.Random(seed)
    while True:
        text = "".join(rnd.choice(alphabet) for _ in range(length))
        kinds = [k for k in (UPPER, LOWER, DIGITS) if set(k) & set(alphabet)]
        if all(set(text) & set(k) for k in kinds):
            return text


def _jwt(seed: str) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"Ada","iat":1516239022}').rstrip(b"=").decode()
    return f"{header}.{claims}.{token(URLSAFE, 43, seed)}"


def _pem(kind: str, seed: str, headers: str = "") -> str:
    body = "\n".join(token(B64, 64, f"{seed}{i}") for i in range(6))
    return f"-----BEGIN {kind}-----\n{headers}{body}\n-----END {kind}-----"


def _wrapped(text: str) -> str:
    """``text`` in base64 as ``base64`` prints it: lines of 76 characters."""
    encoded = base64.b64encode(text.encode()).decode()
    return "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))


@dataclass(frozen=True)
class Sample:
    name: str
    before: str
    secret: str
    after: str
    expected: str | None = None

    @property
    def text(self) -> str:
        return self.before + self.secret + self.after

    def redacted(self, marker: str) -> str:
        return self.expected.replace("{R}", marker) if self.expected is not None else self.before + marker + self.after


_AWS_SECRET = token(B64, 40, "aws-secret")

SAMPLES: tuple[Sample, ...] = (
    # Provider keys, standing alone in prose, commands and output.
    Sample("anthropic", "using key ", "sk-ant-api03-" + token(URLSAFE, 93, "ant") + "AA", " for the call"),
    Sample("openai-project", "OPENAI key is ", "sk-proj-" + token(URLSAFE, 48, "oai"), ", rotate it"),
    Sample("openai-legacy", "curl with ", "sk-" + token(ALNUM, 48, "oai-legacy"), " failed"),
    Sample("aws-access-key-id", "aws id ", "AKIA" + token(UPPER + DIGITS, 16, "akia"), " in us-east-1"),
    Sample("aws-secret-named", "aws_secret_access_key = ", token(B64, 40, "aws-named"), "\nregion = eu-west-1"),
    Sample("aws-secret-unnamed", "the pair is AKIA-less, key ", _AWS_SECRET, " (rotated yesterday)"),
    Sample("github-classic", "remote uses ", "ghp_" + token(ALNUM, 36, "ghp"), " now"),
    Sample("github-oauth", "oauth token ", "gho_" + token(ALNUM, 36, "gho"), " expired"),
    Sample("github-app", "installation ", "ghs_" + token(ALNUM, 36, "ghs"), " granted"),
    Sample("github-fine-grained", "pat ", "github_pat_" + token(ALNUM + "_", 82, "ghpat"), " ok"),
    Sample("gitlab-pat", "gitlab ", "glpat-" + token(URLSAFE, 20, "glpat"), " works"),
    Sample(
        "slack-bot",
        "bot ",
        "xoxb-" + token(DIGITS, 12, "s1") + "-" + token(DIGITS, 13, "s2") + "-" + token(ALNUM, 24, "s3"),
        " posted",
    ),
    Sample(
        "slack-user",
        "user ",
        "xoxp-"
        + token(DIGITS, 12, "u1")
        + "-"
        + token(DIGITS, 12, "u2")
        + "-"
        + token(DIGITS, 13, "u3")
        + "-"
        + token(HEX, 32, "u4"),
        " read",
    ),
    Sample(
        "slack-app",
        "socket mode with ",
        "xapp-1-A" + token(UPPER + DIGITS, 10, "xa") + "-" + token(DIGITS, 13, "xb") + "-" + token(HEX, 64, "xc"),
        " connected",
    ),
    Sample(
        "slack-webhook",
        "POST https://hooks.slack.com/services/",
        "T" + token(UPPER + DIGITS, 8, "w1") + "/B" + token(UPPER + DIGITS, 10, "w2") + "/" + token(ALNUM, 24, "w3"),
        " returned ok",
        "POST {R} returned ok",  # gitleaks takes the whole webhook URL: it is the credential
    ),
    Sample("stripe-secret-live", "charge with ", "sk_live_" + token(ALNUM, 24, "sk_live"), " then retry"),
    Sample("stripe-restricted", "(", "rk_live_" + token(ALNUM, 24, "rk_live"), ") has read access"),
    Sample("stripe-test", "test mode ", "sk_test_" + token(ALNUM, 24, "sk_test"), "!"),
    Sample("stripe-webhook", "signing secret ", "whsec_" + token(ALNUM, 32, "whsec"), " verified"),
    Sample("google-api-key", "maps ", "AIza" + token(URLSAFE, 35, "aiza"), " quota"),
    Sample(
        "google-oauth-client-secret",
        "client secret is ",
        "GOCSPX-" + token(URLSAFE, 28, "gocspx"),
        "; client id 123.apps",
    ),
    Sample("google-access-token", "got ", "ya29." + token(URLSAFE, 60, "ya29"), " back"),
    Sample("google-refresh-token", "refresh ", "1//0" + token(URLSAFE, 60, "refresh"), " stored"),
    Sample("npm", "//registry.npmjs.org/ uses ", "npm_" + token(ALNUM, 36, "npm"), " today"),
    Sample("pypi", "upload with ", "pypi-AgEIcHlwaS5vcmc" + token(URLSAFE, 60, "pypi"), " done"),
    Sample("huggingface", "hub login ", "hf_" + token(UPPER + LOWER, 34, "hf"), " succeeded"),
    Sample("sendgrid", "mail via ", "SG." + token(URLSAFE, 22, "sg1") + "." + token(URLSAFE, 43, "sg2"), " sent"),
    Sample("groq", "groq ", "gsk_" + token(ALNUM, 52, "gsk"), " ok"),
    Sample("replicate", "replicate ", "r8_" + token(ALNUM, 37, "r8"), " ok"),
    Sample("xai", "grok ", "xai-" + token(ALNUM, 80, "xai"), " ok"),
    Sample("digitalocean", "doctl ", "dop_v1_" + token(HEX, 64, "dop"), " ok"),
    Sample("shopify", "shop ", "shpat_" + token(HEX, 32, "shpat"), " ok"),
    Sample("vault", "VAULT says ", "hvs." + token(URLSAFE, 90, "hvs"), " ok"),
    Sample("twilio", "twilio ", "SK" + token(HEX, 32, "twilio"), " ok"),
    Sample("telegram-bot", "bot ", token(DIGITS, 9, "tg1") + ":AA" + token(URLSAFE, 33, "tg2"), " polling"),
    Sample(
        "age-key",
        "age ",
        "AGE-SECRET-KEY-1" + token(UPPER.replace("B", "").replace("I", "").replace("O", "") + "023456789", 58, "age"),
        " ok",
    ),
    # Tokens in headers and cookies.
    Sample("jwt-bare", "token ", _jwt("jwt1"), " decoded"),
    Sample("jwt-cookie", "Cookie: session=", _jwt("jwt2"), "; theme=dark", "Cookie: {R}"),
    Sample("set-cookie", "Set-Cookie: ", "sid=" + token(ALNUM, 32, "sid") + "; Path=/; HttpOnly", "\nVary: Origin"),
    Sample("curl-cookie", "curl -b '", "session=" + token(ALNUM, 24, "curlb"), "' https://app.example.com/api"),
    Sample(
        "discord-webhook",
        "POST https://discord.com/api/webhooks/1234567890/",
        token(URLSAFE, 68, "discord"),
        " with payload",
    ),
    Sample("bearer-header", "Authorization: Bearer ", token(ALNUM, 40, "bearer"), "\nAccept: */*"),
    Sample("basic-header", "-H 'Authorization: Basic ", base64.b64encode(b"alice:pa55w0rd!").decode(), "' https://api"),
    Sample("token-header", "Authorization: token ", token(HEX, 40, "tokhdr"), "\nUser-Agent: x"),
    Sample("proxy-authorization", "Proxy-Authorization: Basic ", token(B64, 24, "proxy"), "\nHost: h"),
    Sample("api-key-header", "-H 'X-Api-Key: ", token(ALNUM, 32, "xapikey"), "' -d @body.json"),
    # Private keys.
    Sample("rsa-private-key", "key:\n", _pem("RSA PRIVATE KEY", "rsa"), "\ndone"),
    Sample("openssh-private-key", "cat id_ed25519\n", _pem("OPENSSH PRIVATE KEY", "ssh"), "\n$ "),
    Sample("ec-private-key", "", _pem("EC PRIVATE KEY", "ec"), "\n"),
    Sample(
        "encrypted-pem",
        "pem: ",
        _pem("RSA PRIVATE KEY", "enc", "Proc-Type: 4,ENCRYPTED\nDEK-Info: DES-EDE3-CBC,3F17F5316E2BAC89\n\n"),
        " end",
    ),
    Sample(
        "pgp-private-key",
        "gpg --export-secret-keys -a\n",
        _pem("PGP PRIVATE KEY BLOCK", "pgp", "Version: GnuPG v2\n\n"),
        "\n",
    ),
    # Connection strings and URLs.
    Sample(
        "azure-account-key",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=",
        token(B64, 86, "azure") + "==",
        ";EndpointSuffix=core.windows.net",
    ),
    Sample(
        "azure-sas-sig",
        "https://acme.blob.core.windows.net/c/f?sv=2022-11-02&sr=b&sig=",
        token(ALNUM, 40, "sas") + "%3D",
        "&se=2030-01-01",
    ),
    Sample("postgres-url", "DATABASE_URL=postgres://app:", "s3cr3tpw", "@db.internal:5432/app"),
    Sample("redis-url-no-user", "redis://:", "hunter2", "@cache:6379/0"),
    Sample("url-password-with-at-and-slash", "psql postgres://admin:", "p@ss/w:rd", "@db:5432/prod"),
    Sample("url-password-with-hash", "mysql://app:", "p#ss?w0rd", "@db:3306/shop"),
    Sample(
        "git-clone-token",
        "git clone https://x-access-token:",
        "ghs_" + token(ALNUM, 36, "clone"),
        "@github.com/acme/app.git",
    ),
    Sample("mongodb-srv", "mongodb+srv://svc:", "Tr0ub4dor", "@cluster0.mongodb.net/db"),
    # Environment and config assignments, any value length.
    Sample("db-pass-env", "export DB_PASS=", "hunter2", "\nexport DB_HOST=db"),
    Sample("mysql-pwd-env", "MYSQL_PWD=", "letmein", " mysql -u root"),
    Sample("pgpassword-env", "PGPASSWORD=", "pgsecret", " psql -h db"),
    Sample("password-short-value", "password=", "ab1", " user=bob"),
    Sample("password-quoted-spaces", 'password = "', "correct horse battery staple", '"\nuser = "bob"'),
    Sample("password-single-quoted", "DB_PASSWORD='", "my secret pw", "' ./run.sh"),
    Sample("json-password", '{"user": "bob", "password": "', "pa55 word", '", "port": 5432}'),
    Sample(
        "json-escaped-secret-access-key",
        '{\\"AccessKeyId\\": \\"id\\", \\"SecretAccessKey\\": \\"',
        token(B64, 40, "escaped"),
        '\\"}',
    ),
    Sample("yaml-client-secret", "client_id: web\nclient_secret: ", token(ALNUM, 24, "yaml"), "\nredirect: /cb"),
    Sample("toml-api-key", 'api_key = "', token(ALNUM, 32, "toml"), '"\ntimeout = 30'),
    Sample("env-github-token", 'export GITHUB_TOKEN="', "abc", '"\n'),
    Sample("powershell-env", '$env:OPENAI_API_KEY = "', "org-local-key", '"; python app.py'),
    Sample("private-key-hex", "PRIVATE_KEY=", "0x" + token(HEX, 64, "eth"), " node deploy.js"),
    Sample("secret-key-base", "SECRET_KEY_BASE=", token(HEX, 64, "rails"), " rails s"),
    Sample("kubectl-from-literal", "kubectl create secret generic db --from-literal=password=", "s3cr3t", " -n prod"),
    Sample("query-access-token", "GET /api/me?access_token=", token(ALNUM, 30, "qat"), "&format=json"),
    Sample("npmrc-auth-token", "//npm.pkg.github.com/:_authToken=", "localtok", "\n"),
    Sample("env-key-suffix", "export STRIPE_KEY=", token(ALNUM, 24, "stripe-env"), "\nexport STRIPE_PUBLIC_KEY=pk"),
    Sample("laravel-app-key", "APP_KEY=", "base64:" + token(B64, 43, "laravel") + "=", "\nAPP_DEBUG=true"),
    Sample("wordpress-define", "define( 'AUTH_KEY', '", "k8#Pq!2 zR@v", "' );"),
    Sample(
        "kubeconfig-client-key-data",
        "    client-key-data: ",
        base64.b64encode(_pem("RSA PRIVATE KEY", "kube").encode()).decode(),
        "\n    token: none",
    ),
    Sample("json-one-char-password", '{"user":"bob","password":"', "a", '"}'),
    # JSON string values holding what JSON escapes: a quote, a backslash, a newline.
    Sample("json-password-escaped-quote", '{"host":"db","password":"', 'Xk9!mQ2\\"vR7#pL4z', '","user":"app"}'),
    Sample("json-password-backslash", '{"password":"', "T7\\\\q$Lm2@Vx9", '","user":"app"}'),
    Sample("json-token-escaped-newline", '{"token":"', "first\\nsecond-Zq8Wp", '"}'),
    Sample(
        "json-escaped-password-escaped-quote",
        '{\\"command\\": \\"login\\", \\"password\\": \\"',
        'pa\\\\\\"ss9',
        '\\"}',
    ),
    Sample("flag-password-with-comma", "deploy --password=", "ab,cd3f9Gh2kL", " --region eu"),
    Sample("prose-api-key", "Here is the API key: ", token(ALNUM, 12, "prose-api"), "\nUse it for staging."),
    Sample("prose-password-for", "Password for bob: ", "t0ps3cret", " (change it soon)"),
    Sample("prose-password-is", "Your password is: ", "Wint3r2026", "\n"),
    # Command-line flags.
    Sample("password-flag", "app --password ", "foo", " --verbose"),
    Sample("password-flag-equals", "app --password=", "foo", " --verbose"),
    Sample("token-flag", "gh-cli --token ", "x", " --repo acme/app"),
    Sample("api-key-flag", "tool --api-key ", "k3y", " run"),
    Sample("mysql-p-glued", "mysql -u root -p", "foo", " shop"),
    Sample("curl-user", "curl -u alice:", "pa55word", " https://api.example.com"),
    Sample("curl-user-long-flag", "curl --user bob:", "hunter2!", " -X POST https://h"),
    Sample("docker-login-p", "docker login -u ci -p ", "dckr-pass", " registry.example.com"),
    Sample("docker-login-password", "docker login --password ", "dckr-pass2", " -u ci registry"),
    Sample("sshpass", "sshpass -p ", "rootpw", " ssh root@host"),
    Sample("keytool-storepass", "keytool -list -keystore ks.jks -storepass ", "changeit2", " -v"),
    Sample("openssl-passin", "openssl rsa -in k.pem -passin pass:", "pemsecret", " -out k2.pem"),
    Sample("redis-cli-a", "redis-cli -h cache -a ", "r3dispw", " ping"),
    Sample("mongosh-p", "mongosh mongodb://db --username app -p ", "m0ngopw", " --eval 'db.stats()'"),
    Sample("sqlcmd-P", "sqlcmd -S db -U sa -P ", "Sq1Pass!", " -Q 'select 1'"),
    Sample("ldapsearch-w", "ldapsearch -x -D cn=admin,dc=example -w ", "ldappw", " -b dc=example"),
    Sample("smbclient-user-percent", "smbclient //files/share -U bob%", "smbpw", " -c ls"),
    Sample("az-login-p", "az login -u ci@example.com -p ", "azur3pw", " --tenant t"),
    Sample("netrc-one-line", "machine api.example.com login me password ", "n3trc", "\nmachine other"),
    Sample("netrc-multi-line", "machine example.org\n  login me\n  password ", "multi", "\n"),
    # Secret keys by name, in settings files, JSON and environment lookups.
    Sample(
        "django-secret-key", "SECRET_KEY = '", "q7#n!x2$" + token(ALNUM, 24, "django") + "^&*()", "'\nDEBUG = False"
    ),
    Sample("flask-secret-key", "app.secret_key = '", token(ALNUM, 20, "flask") + "!#2024", "'\napp.run()"),
    Sample("json-secret-key", '{"endpoint": "s3.local", "secret_key": "', token(ALNUM, 16, "json-sk") + "#$!", '"}'),
    Sample("camel-case-secret-key", "const config = { secretKey: '", "s3cr3t!" + token(ALNUM, 6, "camel"), "' };"),
    Sample("getenv-fallback", "SECRET_KEY = os.getenv('SECRET_KEY', '", "Pr0d#" + token(ALNUM, 12, "getenv"), "')"),
    # Passwords piped into a command that reads them from standard input.
    Sample("echo-to-sudo-stdin", "echo '", "Wint3r!" + token(ALNUM, 8, "sudo"), "' | sudo -S systemctl restart nginx"),
    Sample(
        "echo-to-password-stdin",
        "echo ",
        token(ALNUM, 16, "stdin"),
        " | docker login -u bob --password-stdin registry.example.com",
    ),
    Sample("echo-to-chpasswd", "echo 'deploy:", "Ch4nge!" + token(ALNUM, 8, "chpasswd"), "' | chpasswd"),
    Sample("echo-to-passwd-stdin", "echo '", token(ALNUM, 12, "passwd"), "' | passwd --stdin deploy"),
    # Name/value lists: the name says what the value is.
    Sample(
        "kubernetes-env-name-value",
        "env:\n  - name: DB_PASSWORD\n    value: ",
        token(ALNUM, 12, "k8s"),
        "\n  - name: DB_HOST\n    value: db",
    ),
    Sample(
        "ecs-env-json-name-value",
        '[{"name": "STRIPE_SECRET", "value": "',
        token(ALNUM, 16, "ecs"),
        '"}, {"name": "REGION", "value": "eu"}]',
    ),
    # Other tools' ways of taking a secret.
    Sample("fish-set-export", "set -gx OPENAI_API_KEY ", token(ALNUM, 20, "fish"), "\nset -gx EDITOR vim"),
    Sample("pgpass-line", "$ cat ~/.pgpass\ndb.acme.internal:5432:*:app:", token(ALNUM, 14, "pgpass"), "\n$ "),
    Sample("htpasswd-b", "htpasswd -b -c /etc/nginx/.htpasswd admin ", token(ALNUM, 13, "htpasswd"), "\n"),
    Sample("openssl-enc-k", "openssl enc -aes-256-cbc -k ", token(ALNUM, 12, "openssl-k"), " -in db.sql -out db.enc"),
    Sample("zip-P", "zip -P ", token(ALNUM, 13, "zip"), " backup.zip db.sql"),
    Sample("7z-p-glued", "7z a -p", token(ALNUM, 12, "7z"), " backup.7z dump/"),
    Sample("httpie-auth", "http -a bob:", token(ALNUM, 12, "httpie"), " https://api.example.com/me"),
    Sample("gh-secret-set-body", "gh secret set DEPLOY_TOKEN --body ", token(ALNUM, 20, "gh-body"), " --repo acme/app"),
    Sample("github-actions-add-mask", "echo ::add-mask::", token(ALNUM, 20, "mask"), "\n"),
    Sample(
        "openweathermap-appid",
        "GET https://api.openweathermap.org/data/2.5/weather?q=Oslo&appid=",
        token(HEX, 32, "owm"),
        "&units=metric",
    ),
    # URLs: a bot token in the path, credentials written escaped, URL-encoded text.
    Sample(
        "telegram-bot-url",
        "curl https://api.telegram.org/bot",
        token(DIGITS, 10, "tg-url") + ":" + token(URLSAFE, 35, "tg-url2"),
        "/getUpdates",
    ),
    Sample("url-credentials-json-escaped", '{"dsn":"mysql:\\/\\/app:', token(ALNUM, 12, "escaped-url"), '@db\\/app"}'),
    Sample(
        "url-credentials-after-underscore",
        "mcp__https://admin:",
        token(ALNUM, 11, "underscore"),
        "@mcp.example.com__fetch",
    ),
    Sample("url-encoded-dsn", "conn=postgres%3A%2F%2Fadmin%3A", "Tr0ub%26" + token(ALNUM, 8, "urlenc"), "%40db%2Fprod"),
    Sample("url-encoded-json-body", "body=%7B%22password%22%3A%20%22", token(ALNUM, 13, "urlbody"), "%22%7D"),
    Sample("flask-bytes-secret-key", "app.secret_key = b'", token(ALNUM, 24, "flaskb"), "'"),
    Sample("flask-config-secret-key", "app.config['SECRET_KEY'] = '", token(ALNUM, 24, "flaskc"), "'"),
    Sample("os-environ-set-token", 'os.environ["API_TOKEN"] = "', token(ALNUM, 20, "environ"), '"'),
    Sample("rails-secret-key-base-env", "- name: SECRET_KEY_BASE\n  value: ", token(HEX, 32, "rails"), "\n"),
    Sample("token-name-with-a-suffix", '{"name": "GITHUB_TOKEN_CI", "value": "', token(ALNUM, 20, "ci"), '"}'),
    Sample("fish-token-with-a-suffix", "set -gx SLACK_BOT_TOKEN_PROD ", token(ALNUM, 20, "prod"), "\n"),
    Sample("sudo-long-option-stdin", "echo ", token(ALNUM, 12, "sudolong"), " | sudo --user=deploy -S true"),
    Sample("form-encoded-mysql-password", "cmd=mysql+-u+root+-p", token(ALNUM, 12, "formpw") + "%21", "&run=1"),
    Sample(
        "url-encoded-form-with-plus",
        "curl -d user=bob%26password%3D",
        "correct+horse+" + token(ALNUM, 9, "plus"),
        " https://x",
    ),
    # base64 as `base64` prints it: wrapped at 76 columns.
    Sample(
        "base64-wrapped-private-key", "$ base64 ~/.ssh/id_ed25519\n", _wrapped(_pem("OPENSSH PRIVATE KEY", "w")), "\n$ "
    ),
)
"""At least 60 formats; each ``secret`` must disappear and each context stay."""

KEPT: tuple[str, ...] = (
    "src/cfg.py:12: def load_config(path):",
    "https://example.com/docs?page=2",
    "max_tokens = 4096, token_count: 12",
    "ssh user@host",
    "the token is described in docs/auth.md",
    "echo secret | docker login --password-stdin -u ci registry",
    "commit 3f3cc1c0a3f3cc1c0a3f3cc1c0a3f3cc1c0a3f3c",
    "id 0f8fad5b-d9cb-469f-a165-70867728950e",
    "password_reset_url = '/reset'",
    "api_key = api_key",
    "self.token = self._load_token()",
    "password: str",
    "def login(password=None):",
    "mkdir -p build && docker run -u 1000:1000 img",
    "git@github.com:acme/app.git",
    "PASSWORD_MIN_LENGTH=8",
    "Enter password:",
    "--token-file ~/.tok",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVr user@host",
    "key_id: 42",
    "secret = data[start:end]",
    "call(signature=stats.preview)",
    "the password: see below",
    'AGENT_KEY = "repeat_tool_guard_agent"',
    "STRIPE_PUBLISHABLE_KEY=pk_live_abc",
    "env:\n  - name: DB_HOST\n    value: db.internal",
    "- name: API_TOKEN\n  valueFrom:\n    secretKeyRef:\n      name: api\n      key: token",
    "store.put(key=cache_key, value=payload)",
    '{"key": "sort_key", "value": "created_at"}',
    "os.getenv('SECRET_KEY', '')",
    "SECRET_KEY = os.environ['SECRET_KEY']",
    'echo "$DB_PASSWORD" | sudo -S true',
    "set -gx MAX_TOKENS 4096",
    "README.md:42:foo:bar:baz",
    "wget https://example.com/a.zip -P /tmp/downloads",
    "https://example.com/search?q=a%20b&page=2",
    "- name: TOKENIZER\n  value: cl100k_base",
    "- name: DB_PASSWORD_FILE\n  value: /run/secrets/db",
    "- name: API_KEY_HEADER\n  value: X-Api-Key",
    '{"name": "token_type", "value": "Bearer"}',
    "echo y | sudo pacman -Syu",
    "echo foo | sudo sort -S 1G",
    "set -gx SSH_AUTH_SOCK /run/user/1000/ssh-agent.sock",
    "os.getenv('SSL_KEY', 'certs/server.key')",
    "process.env.API_KEY_HEADER || 'x-api-key'",
    "echo data | sudo -E sort -S 1G",
    "INFO [auth]: session refreshed",
    "vocab[token] = idx",
    "creds: list[Credentials] = defaults",
    "[token]: https://example.com/docs/tokens",
)
"""Ordinary text that looks a little like a secret and must pass unchanged."""
