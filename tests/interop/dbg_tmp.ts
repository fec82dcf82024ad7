import { HttpAgent } from "@ag-ui/client";
import { ReattachingHttpAgent } from "../../clients/typescript/reattaching-http-agent";
const [url, token, cwd, kind] = process.argv.slice(2);
process.on("uncaughtException", (e: any) => { console.log("UNCAUGHT", e?.message, e?.stack?.split("\n").slice(0, 3).join("|")); process.exit(3); });
const Cls: any = kind === "plain" ? HttpAgent : ReattachingHttpAgent;
const agent = new Cls({ url, headers: { Authorization: `Bearer ${token}` }, initialMessages: [{ id: "m1", role: "user", content: "[mixed] go" }] });
let n = 0;
try { await agent.runAgent({ forwardedProps: { iacCode: { schemaVersion: 1, rosInvocationId: "r1", cwd } } }, { onEvent: () => { n++; } }); console.log("resolved", n); } catch (e: any) { console.log("rejected", e.message, n); }
