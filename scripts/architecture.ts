/**
 * `npm run arch`: the graph of the server's rooms (server/* folders and top-level modules) read
 * from the TypeScript imports — type-only imports included, since a type import ties a room's
 * meaning to another's as much as a value does. Reports the rooms, the floors they stand on
 * (FLOORS in eslint.config.js, the same order ESLint enforces), the arrows between rooms, every
 * import that runs up the floors (the listed exceptions marked) and every cycle, between rooms and
 * between files. Test files are left out: they may reach anywhere.
 *
 * Exits 1 when an import runs up the floors without being a listed exception, when rooms form a
 * cycle that no listed exception explains, or when a room stands on no floor. Cycles between the
 * files of one room are reported and counted, not (yet) refused. `--json` prints the figures.
 */
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

interface Floor {
  name: string;
  rooms: string[];
  holds: string;
}
interface FloorException {
  files: string[];
  imports: string[];
  why: string;
}
// The floors are ESLint's (a plain JS config, which this TypeScript reads without declarations).
const CONFIG = "../eslint.config.js";
const { FLOORS, FLOOR_EXCEPTIONS } = (await import(CONFIG)) as { FLOORS: Floor[]; FLOOR_EXCEPTIONS: FloorException[] };

const ROOT = path.resolve(process.argv.find((arg) => arg.startsWith("--root="))?.slice(7) ?? process.cwd());
const SERVER = path.join(ROOT, "server");
const SKIPPED = new Set(["generated"]);

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

function sourceFiles(directory: string, found: string[] = []): string[] {
  for (const entry of fs.readdirSync(directory, { withFileTypes: true })) {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED.has(entry.name)) sourceFiles(full, found);
    } else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name)) {
      found.push(full);
    }
  }
  return found;
}

function resolveImport(fromFile: string, specifier: string): string | undefined {
  let base: string;
  if (specifier.startsWith("@/")) base = path.join(ROOT, specifier.slice(2));
  else if (specifier.startsWith(".")) base = path.resolve(path.dirname(fromFile), specifier);
  else return undefined;
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, path.join(base, "index.ts")]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

function isTypeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) return node.isTypeOnly;
  const clause = node.importClause;
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return (
    !clause.name &&
    bindings !== undefined &&
    ts.isNamedImports(bindings) &&
    bindings.elements.length > 0 &&
    bindings.elements.every((element) => element.isTypeOnly)
  );
}

function importsOf(file: string): Import[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const found: Import[] = [];
  const add = (specifier: string, typeOnly: boolean) => {
    const to = resolveImport(file, specifier);
    if (to?.startsWith(SERVER + path.sep)) found.push({ from: file, to, typeOnly });
  };
  const visit = (node: ts.Node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      add(node.moduleSpecifier.text, isTypeOnly(node));
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `server/plans/service.ts` → `plans`; `server/vocabulary.ts` → `vocabulary.ts`. */
function roomOf(file: string): string {
  const parts = path.relative(SERVER, file).split(path.sep);
  return parts.length > 1 ? parts[0]! : parts[0]!.replace(/\.tsx$/, ".ts");
}

const relative = (file: string) => path.relative(ROOT, file).split(path.sep).join("/");

/** Strongly connected components with more than one member (Tarjan). */
function cycles(nodes: string[], edges: Map<string, Set<string>>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (node: string) => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of nodes) if (!index.has(node)) connect(node);
  return found;
}

function matchesException(from: string, to: string) {
  return FLOOR_EXCEPTIONS.find(
    (exception) => exception.files.includes(from) && exception.imports.some((target) => to === target),
  );
}

const floorOf = new Map<string, number>();
FLOORS.forEach((floor, level) => floor.rooms.forEach((room) => floorOf.set(room, FLOORS.length - level)));

const files = sourceFiles(SERVER);
const imports = files.flatMap(importsOf).filter((entry) => !entry.to.includes(`${path.sep}generated${path.sep}`));
const rooms = [...new Set(files.map(roomOf))].sort();
const unplaced = rooms.filter((room) => !floorOf.has(room));

const roomEdges = new Map<string, Set<string>>();
/** The arrows without those that only the listed exceptions draw. */
const unexceptedRoomEdges = new Map<string, Set<string>>();
const fileEdges = new Map<string, Set<string>>();
const addEdge = (edges: Map<string, Set<string>>, from: string, to: string) => {
  if (!edges.has(from)) edges.set(from, new Set());
  edges.get(from)!.add(to);
};
for (const { from, to } of imports) {
  const [fromRoom, toRoom] = [roomOf(from), roomOf(to)];
  if (fromRoom !== toRoom) {
    addEdge(roomEdges, fromRoom, toRoom);
    if (!matchesException(relative(from), relative(to))) addEdge(unexceptedRoomEdges, fromRoom, toRoom);
  }
  addEdge(fileEdges, from, to);
}
const arrows = [...roomEdges.values()].reduce((sum, targets) => sum + targets.size, 0);

const upward = imports
  .filter(({ from, to }) => {
    const [fromFloor, toFloor] = [floorOf.get(roomOf(from)), floorOf.get(roomOf(to))];
    return fromFloor !== undefined && toFloor !== undefined && toFloor > fromFloor;
  })
  .map(({ from, to, typeOnly }) => ({
    from: relative(from),
    to: relative(to),
    typeOnly,
    exception: matchesException(relative(from), relative(to))?.why,
  }));
const upwardArrows = new Set(
  upward.map(({ from, to }) => `${roomOf(path.join(ROOT, from))} → ${roomOf(path.join(ROOT, to))}`),
);
const roomCycles = cycles(rooms, roomEdges);
const unexcusedRoomCycles = cycles(rooms, unexceptedRoomEdges);
const fileCycles = cycles(files, fileEdges).map((component) => component.map(relative));
const unexcused = upward.filter((entry) => !entry.exception);

const figures = {
  rooms: rooms.length,
  floors: new Set(rooms.map((room) => floorOf.get(room)).filter((floor) => floor !== undefined)).size,
  arrows,
  upwardImports: upward.length,
  upwardArrows: upwardArrows.size,
  listedExceptions: upward.length - unexcused.length,
  roomCycles: roomCycles.length,
  fileCycles: fileCycles.length,
  unplacedRooms: unplaced,
};

if (process.argv.includes("--json")) {
  console.log(JSON.stringify({ ...figures, upward, roomCycles, fileCycles }, null, 2));
} else {
  const lines: string[] = [];
  lines.push(
    `${figures.rooms} rooms on ${figures.floors} floors, ${arrows} arrows between rooms; ` +
      `${upward.length} imports run up the floors (${upwardArrows.size} arrows, ${figures.listedExceptions} listed as exceptions); ` +
      `${roomCycles.length} cycles between rooms, ${fileCycles.length} between files.`,
  );
  lines.push("", "Floors, top to bottom (eslint.config.js, FLOORS):");
  FLOORS.forEach((floor, level) => {
    const present = floor.rooms.filter((room) => rooms.includes(room));
    lines.push(`  ${String(FLOORS.length - level).padStart(2)} ${floor.name.padEnd(16)} ${present.join(", ")}`);
  });
  lines.push("", "Arrows (room → rooms below or beside it):");
  for (const room of [...rooms].sort((a, b) => (floorOf.get(b) ?? 0) - (floorOf.get(a) ?? 0))) {
    const targets = [...(roomEdges.get(room) ?? [])].sort();
    if (targets.length) lines.push(`  ${room} → ${targets.join(", ")}`);
  }
  if (upward.length) {
    lines.push("", "Imports up the floors:");
    for (const entry of upward) {
      lines.push(
        `  ${entry.from} → ${entry.to}${entry.typeOnly ? " (type)" : ""}${entry.exception ? ` — exception: ${entry.exception}` : ""}`,
      );
    }
  }
  for (const component of roomCycles) {
    const excused = !unexcusedRoomCycles.some((other) => other.some((room) => component.includes(room)));
    lines.push("", `Cycle between rooms: ${component.join(", ")}${excused ? " (through a listed exception)" : ""}`);
  }
  for (const component of fileCycles) lines.push("", `Cycle between files: ${component.join(", ")}`);
  if (unplaced.length) lines.push("", `Rooms on no floor (add them to FLOORS): ${unplaced.join(", ")}`);
  console.log(lines.join("\n"));
}

if (unexcused.length || unexcusedRoomCycles.length || unplaced.length) process.exitCode = 1;
