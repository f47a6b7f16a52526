// A certified OpenID Provider (panva's oidc-provider, from the npm registry) for the tests of signing
// people in through a tenant's identity provider. One client; its development sign-in pages take
// any login name (the password is ignored) and ask for consent.
//
//   OIDC_DIR=var/conformance/oidc node tests/backends/oidc_provider.mjs <port> <client_id> <client_secret> <redirect_uri>
// (the package is resolved from $OIDC_DIR, where scripts/install-node-parts.sh installs it)
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const entry = path.join(process.env.OIDC_DIR, 'node_modules', 'oidc-provider', 'lib', 'index.js');
const { default: Provider } = await import(pathToFileURL(entry).href);

const [port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'preferred_username'] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: `${id}@acme.example`, email_verified: true, name: id, preferred_username: id };
      },
    };
  },
});
provider.listen(Number(port), '127.0.0.1');
