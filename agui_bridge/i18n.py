"""Language selection (behaviour.md 1.7) and the message catalogue of every user-facing text (D12).

The language is always request-local: callers pass it explicitly, nothing here keeps global state
except the immutable catalogue. English is the source language; every entry has a real
translation in every supported language (a unit test enforces it, placeholders included).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "CATALOG",
    "FALLBACK_KEY",
    "SUPPORTED",
    "is_catalog_message",
    "key_for_message",
    "language_from_accept",
    "localise_text",
    "message_template",
    "normalise_language",
    "process_default_language",
    "select_language",
    "translate",
]

SUPPORTED: Final = ("en", "zh", "ja", "es", "fr", "de", "pt")
SOURCE_LANGUAGE: Final = "en"
#: Shown (localised) instead of an unknown catalogue key at runtime.
FALLBACK_KEY: Final = "internal_error"

_LOCALE_VARIABLES: Final = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


# --------------------------------------------------------------------------------------------
# Language selection


def normalise_language(tag: object) -> str | None:
    """``"zh-CN"`` -> ``"zh"``, ``" EN_us "`` -> ``"en"``; unsupported or non-string -> None."""
    if not isinstance(tag, str):
        return None
    primary = tag.strip().lower().replace("_", "-").split("-", 1)[0]
    return primary if primary in SUPPORTED else None


def process_default_language(environ: Mapping[str, str]) -> str:
    """First of LANGUAGE, LC_ALL, LC_MESSAGES, LANG that names a supported language, else ``en``.

    A value is cut at ``_`` and ``.`` (``de_DE.UTF-8`` -> ``de``); we also cut at ``@`` and take the
    first entry of a GNU ``LANGUAGE`` list (``fr:en`` -> ``fr``), which the reference did not, so
    that ordinary locale settings are honoured.
    """
    for name in _LOCALE_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        first = value.split(":", 1)[0]
        language = normalise_language(re.split(r"[_.@]", first, maxsplit=1)[0])
        if language is not None:
            return language
    return SOURCE_LANGUAGE


def _weight(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def language_from_accept(header: str | None, default: str) -> str:
    """Pick the best supported language of an ``Accept-Language`` header (1.7).

    Highest q wins, ties go to the earliest item; q <= 0, q > 1, non-finite q and unsupported tags
    are dropped; ``*`` stands for ``default``. Nothing usable -> ``default``.
    """
    fallback = normalise_language(default) or SOURCE_LANGUAGE
    if not header:
        return fallback
    best: str | None = None
    best_weight = 0.0
    for item in header.split(","):
        tag, *params = item.split(";")
        tag = tag.strip()
        if not tag:
            continue
        weight = _weight(params)
        if not math.isfinite(weight) or weight <= 0.0 or weight > 1.0:
            continue
        language = fallback if tag == "*" else normalise_language(tag)
        if language is not None and weight > best_weight:
            best, best_weight = language, weight
    return best or fallback


def select_language(accept_language: str | None, preferred_language: object, default: str) -> str:
    """``preferredLanguage`` (if supported) > ``Accept-Language`` > process default."""
    preferred = normalise_language(preferred_language)
    if preferred is not None:
        return preferred
    return language_from_accept(accept_language, default)


# --------------------------------------------------------------------------------------------
# Catalogue: key -> language -> text. Placeholders use str.format syntax.

CATALOG: Final[dict[str, dict[str, str]]] = {
    # --- pre-stream HTTP errors -------------------------------------------------------------
    "unauthorized": {
        "en": "A valid bearer token is required.",
        "zh": "需要有效的 Bearer 令牌。",
        "ja": "有効なベアラートークンが必要です。",
        "es": "Se requiere un token de portador válido.",
        "fr": "Un jeton d'accès (bearer) valide est requis.",
        "de": "Ein gültiges Bearer-Token ist erforderlich.",
        "pt": "É necessário um token de portador válido.",
    },
    "unsupported_media_type": {
        "en": "Content-Type must be application/json.",
        "zh": "Content-Type 必须是 application/json。",
        "ja": "Content-Type は application/json である必要があります。",
        "es": "El Content-Type debe ser application/json.",
        "fr": "Le Content-Type doit être application/json.",
        "de": "Der Content-Type muss application/json sein.",
        "pt": "O Content-Type deve ser application/json.",
    },
    "request_too_large": {
        "en": "The AG-UI request body is too large.",
        "zh": "AG-UI 请求体过大。",
        "ja": "AG-UI リクエストの本文が大きすぎます。",
        "es": "El cuerpo de la solicitud AG-UI es demasiado grande.",
        "fr": "Le corps de la requête AG-UI est trop volumineux.",
        "de": "Der Inhalt der AG-UI-Anfrage ist zu groß.",
        "pt": "O corpo da solicitação AG-UI é grande demais.",
    },
    "cancel_request_too_large": {
        "en": "The cancel request body is too large.",
        "zh": "取消请求的请求体过大。",
        "ja": "キャンセルリクエストの本文が大きすぎます。",
        "es": "El cuerpo de la solicitud de cancelación es demasiado grande.",
        "fr": "Le corps de la requête d'annulation est trop volumineux.",
        "de": "Der Inhalt der Abbruchanfrage ist zu groß.",
        "pt": "O corpo da solicitação de cancelamento é grande demais.",
    },
    "invalid_json": {
        "en": "The request body is not valid JSON.",
        "zh": "请求体不是有效的 JSON。",
        "ja": "リクエストの本文が有効な JSON ではありません。",
        "es": "El cuerpo de la solicitud no es un JSON válido.",
        "fr": "Le corps de la requête n'est pas un JSON valide.",
        "de": "Der Inhalt der Anfrage ist kein gültiges JSON.",
        "pt": "O corpo da solicitação não é um JSON válido.",
    },
    "cancel_invalid_json": {
        "en": "The cancel request body is not valid JSON.",
        "zh": "取消请求的请求体不是有效的 JSON。",
        "ja": "キャンセルリクエストの本文が有効な JSON ではありません。",
        "es": "El cuerpo de la solicitud de cancelación no es un JSON válido.",
        "fr": "Le corps de la requête d'annulation n'est pas un JSON valide.",
        "de": "Der Inhalt der Abbruchanfrage ist kein gültiges JSON.",
        "pt": "O corpo da solicitação de cancelamento não é um JSON válido.",
    },
    "not_an_object": {
        "en": "RunAgentInput must be a JSON object.",
        "zh": "RunAgentInput 必须是 JSON 对象。",
        "ja": "RunAgentInput は JSON オブジェクトである必要があります。",
        "es": "RunAgentInput debe ser un objeto JSON.",
        "fr": "RunAgentInput doit être un objet JSON.",
        "de": "RunAgentInput muss ein JSON-Objekt sein.",
        "pt": "RunAgentInput deve ser um objeto JSON.",
    },
    "invalid_envelope": {
        "en": "Invalid AG-UI RunAgentInput envelope.",
        "zh": "AG-UI RunAgentInput 信封无效。",
        "ja": "AG-UI RunAgentInput エンベロープが無効です。",
        "es": "El sobre RunAgentInput de AG-UI no es válido.",
        "fr": "L'enveloppe RunAgentInput AG-UI n'est pas valide.",
        "de": "Ungültiger AG-UI-RunAgentInput-Umschlag.",
        "pt": "Envelope RunAgentInput do AG-UI inválido.",
    },
    "invalid_forwarded_props": {
        "en": "Invalid iac-code forwarded properties.",
        "zh": "iac-code 转发属性无效。",
        "ja": "iac-code の転送プロパティが無効です。",
        "es": "Las propiedades reenviadas de iac-code no son válidas.",
        "fr": "Les propriétés transmises à iac-code ne sont pas valides.",
        "de": "Ungültige weitergeleitete iac-code-Eigenschaften.",
        "pt": "Propriedades encaminhadas do iac-code inválidas.",
    },
    "cancel_not_an_object": {
        "en": "The cancel request must be a JSON object.",
        "zh": "取消请求必须是 JSON 对象。",
        "ja": "キャンセルリクエストは JSON オブジェクトである必要があります。",
        "es": "La solicitud de cancelación debe ser un objeto JSON.",
        "fr": "La requête d'annulation doit être un objet JSON.",
        "de": "Die Abbruchanfrage muss ein JSON-Objekt sein.",
        "pt": "A solicitação de cancelamento deve ser um objeto JSON.",
    },
    "cancel_fields_required": {
        "en": "threadId and rosInvocationId are required.",
        "zh": "threadId 和 rosInvocationId 为必填项。",
        "ja": "threadId と rosInvocationId は必須です。",
        "es": "threadId y rosInvocationId son obligatorios.",
        "fr": "threadId et rosInvocationId sont obligatoires.",
        "de": "threadId und rosInvocationId sind erforderlich.",
        "pt": "threadId e rosInvocationId são obrigatórios.",
    },
    "status_request_too_large": {
        "en": "The status request body is too large.",
        "zh": "状态请求的请求体过大。",
        "ja": "ステータスリクエストの本文が大きすぎます。",
        "es": "El cuerpo de la solicitud de estado es demasiado grande.",
        "fr": "Le corps de la requête d'état est trop volumineux.",
        "de": "Der Inhalt der Statusanfrage ist zu groß.",
        "pt": "O corpo da solicitação de status é grande demais.",
    },
    "status_invalid_json": {
        "en": "The status request body is not valid JSON.",
        "zh": "状态请求的请求体不是有效的 JSON。",
        "ja": "ステータスリクエストの本文が有効な JSON ではありません。",
        "es": "El cuerpo de la solicitud de estado no es un JSON válido.",
        "fr": "Le corps de la requête d'état n'est pas un JSON valide.",
        "de": "Der Inhalt der Statusanfrage ist kein gültiges JSON.",
        "pt": "O corpo da solicitação de status não é um JSON válido.",
    },
    "status_not_an_object": {
        "en": "The status request must be a JSON object.",
        "zh": "状态请求必须是 JSON 对象。",
        "ja": "ステータスリクエストは JSON オブジェクトである必要があります。",
        "es": "La solicitud de estado debe ser un objeto JSON.",
        "fr": "La requête d'état doit être un objet JSON.",
        "de": "Die Statusanfrage muss ein JSON-Objekt sein.",
        "pt": "A solicitação de status deve ser um objeto JSON.",
    },
    "status_ros_required": {
        "en": "rosInvocationId is required.",
        "zh": "rosInvocationId 为必填项。",
        "ja": "rosInvocationId は必須です。",
        "es": "rosInvocationId es obligatorio.",
        "fr": "rosInvocationId est obligatoire.",
        "de": "rosInvocationId ist erforderlich.",
        "pt": "rosInvocationId é obrigatório.",
    },
    "tools_not_supported": {
        "en": "Client-provided tools are not supported.",
        "zh": "不支持客户端提供的工具。",
        "ja": "クライアントが提供するツールはサポートされていません。",
        "es": "No se admiten herramientas proporcionadas por el cliente.",
        "fr": "Les outils fournis par le client ne sont pas pris en charge.",
        "de": "Vom Client bereitgestellte Werkzeuge werden nicht unterstützt.",
        "pt": "Ferramentas fornecidas pelo cliente não são suportadas.",
    },
    "cwd_not_absolute": {
        "en": "The workspace path must be an absolute path.",
        "zh": "工作区路径必须是绝对路径。",
        "ja": "ワークスペースのパスは絶対パスである必要があります。",
        "es": "La ruta del espacio de trabajo debe ser una ruta absoluta.",
        "fr": "Le chemin de l'espace de travail doit être un chemin absolu.",
        "de": "Der Arbeitsbereichspfad muss ein absoluter Pfad sein.",
        "pt": "O caminho do espaço de trabalho deve ser um caminho absoluto.",
    },
    "cwd_invalid": {
        "en": "The workspace path is invalid.",
        "zh": "工作区路径无效。",
        "ja": "ワークスペースのパスが無効です。",
        "es": "La ruta del espacio de trabajo no es válida.",
        "fr": "Le chemin de l'espace de travail n'est pas valide.",
        "de": "Der Arbeitsbereichspfad ist ungültig.",
        "pt": "O caminho do espaço de trabalho é inválido.",
    },
    "cwd_outside_roots": {
        "en": "The workspace path is outside the allowed roots.",
        "zh": "工作区路径不在允许的根目录范围内。",
        "ja": "ワークスペースのパスが許可されたルートの外にあります。",
        "es": "La ruta del espacio de trabajo está fuera de las raíces permitidas.",
        "fr": "Le chemin de l'espace de travail est en dehors des racines autorisées.",
        "de": "Der Arbeitsbereichspfad liegt außerhalb der erlaubten Wurzelverzeichnisse.",
        "pt": "O caminho do espaço de trabalho está fora das raízes permitidas.",
    },
    "cwd_not_directory": {
        "en": "The workspace path is not a directory.",
        "zh": "工作区路径不是目录。",
        "ja": "ワークスペースのパスはディレクトリではありません。",
        "es": "La ruta del espacio de trabajo no es un directorio.",
        "fr": "Le chemin de l'espace de travail n'est pas un répertoire.",
        "de": "Der Arbeitsbereichspfad ist kein Verzeichnis.",
        "pt": "O caminho do espaço de trabalho não é um diretório.",
    },
    "cwd_cannot_create": {
        "en": "The workspace directory cannot be created.",
        "zh": "无法创建工作区目录。",
        "ja": "ワークスペースのディレクトリを作成できません。",
        "es": "No se puede crear el directorio del espacio de trabajo.",
        "fr": "Impossible de créer le répertoire de l'espace de travail.",
        "de": "Das Arbeitsbereichsverzeichnis kann nicht erstellt werden.",
        "pt": "Não é possível criar o diretório do espaço de trabalho.",
    },
    "cwd_too_long": {
        "en": "{field} is too long (at most {max_component} bytes per name, {max_path} in all).",
        "zh": "{field} 过长（每个名称最多 {max_component} 字节，总计最多 {max_path} 字节）。",
        "ja": "{field} が長すぎます（名前ごとに最大 {max_component} バイト、全体で {max_path} バイト）。",
        "es": "{field} es demasiado largo (máximo {max_component} bytes por nombre, {max_path} en total).",
        "fr": "{field} est trop long (au plus {max_component} octets par nom, {max_path} au total).",
        "de": "{field} ist zu lang (höchstens {max_component} Bytes je Name, {max_path} insgesamt).",
        "pt": "{field} é longo demais (no máximo {max_component} bytes por nome, {max_path} no total).",
    },
    "json_too_deep": {
        "en": "The request body is nested too deeply at {field} (at most {max} levels).",
        "zh": "请求体在 {field} 处嵌套过深（最多 {max} 层）。",
        "ja": "リクエストの本文が {field} で深くネストしすぎています（最大 {max} 階層）。",
        "es": "El cuerpo de la solicitud está anidado demasiado en {field} (como máximo {max} niveles).",
        "fr": "Le corps de la requête est trop imbriqué à {field} (au plus {max} niveaux).",
        "de": "Der Inhalt der Anfrage ist bei {field} zu tief verschachtelt (höchstens {max} Ebenen).",
        "pt": "O corpo da solicitação está aninhado demais em {field} (no máximo {max} níveis).",
    },
    "json_too_many_values": {
        "en": "The request body contains too many JSON values (at most {max}).",
        "zh": "请求体包含的 JSON 值过多（最多 {max} 个）。",
        "ja": "リクエストの本文に含まれる JSON 値が多すぎます（最大 {max} 個）。",
        "es": "El cuerpo de la solicitud contiene demasiados valores JSON (como máximo {max}).",
        "fr": "Le corps de la requête contient trop de valeurs JSON (au plus {max}).",
        "de": "Der Inhalt der Anfrage enthält zu viele JSON-Werte (höchstens {max}).",
        "pt": "O corpo da solicitação contém valores JSON demais (no máximo {max}).",
    },
    "too_many_items": {
        "en": "{field} has too many entries (at most {max}).",
        "zh": "{field} 的条目过多（最多 {max} 个）。",
        "ja": "{field} の項目が多すぎます（最大 {max} 個）。",
        "es": "{field} tiene demasiadas entradas (como máximo {max}).",
        "fr": "{field} contient trop d'entrées (au plus {max}).",
        "de": "{field} hat zu viele Einträge (höchstens {max}).",
        "pt": "{field} tem entradas demais (no máximo {max}).",
    },
    "too_many_parts": {
        "en": "Too many content parts and tool calls in all messages (at most {max}): {field}.",
        "zh": "所有消息中的内容部分和工具调用过多（最多 {max} 个）：{field}。",
        "ja": "全メッセージのコンテンツパーツとツール呼び出しが多すぎます（最大 {max} 個）：{field}。",
        "es": "Demasiadas partes de contenido y llamadas a herramientas (máximo {max}): {field}.",
        "fr": "Trop de parties de contenu et d'appels d'outils (au plus {max}) : {field}.",
        "de": "Zu viele Inhaltsteile und Werkzeugaufrufe (höchstens {max}): {field}.",
        "pt": "Partes de conteúdo e chamadas de ferramenta demais (no máximo {max}): {field}.",
    },
    "message_text_too_long": {
        "en": "The text of {field} is too long (at most {max} characters).",
        "zh": "{field} 的文本过长（最多 {max} 个字符）。",
        "ja": "{field} のテキストが長すぎます（最大 {max} 文字）。",
        "es": "El texto de {field} es demasiado largo (como máximo {max} caracteres).",
        "fr": "Le texte de {field} est trop long (au plus {max} caractères).",
        "de": "Der Text von {field} ist zu lang (höchstens {max} Zeichen).",
        "pt": "O texto de {field} é longo demais (no máximo {max} caracteres).",
    },
    "request_body_too_slow": {
        "en": "The request body arrived too slowly and was not accepted.",
        "zh": "请求体传输过慢，未被接受。",
        "ja": "リクエストの本文の到着が遅すぎたため、受け付けられませんでした。",
        "es": "El cuerpo de la solicitud llegó demasiado despacio y no fue aceptado.",
        "fr": "Le corps de la requête est arrivé trop lentement et n'a pas été accepté.",
        "de": "Der Inhalt der Anfrage kam zu langsam an und wurde nicht angenommen.",
        "pt": "O corpo da solicitação chegou devagar demais e não foi aceito.",
    },
    "state_unavailable": {
        "en": "The AG-UI adapter state is unavailable.",
        "zh": "AG-UI 适配器状态不可用。",
        "ja": "AG-UI アダプターの状態を利用できません。",
        "es": "El estado del adaptador AG-UI no está disponible.",
        "fr": "L'état de l'adaptateur AG-UI n'est pas disponible.",
        "de": "Der Zustand des AG-UI-Adapters ist nicht verfügbar.",
        "pt": "O estado do adaptador AG-UI não está disponível.",
    },
    "service_unavailable": {
        "en": "The AG-UI bridge is not accepting new runs right now. Retry later.",
        "zh": "AG-UI 网桥当前不接受新的运行。请稍后重试。",
        "ja": "AG-UI ブリッジは現在新しい実行を受け付けていません。後で再試行してください。",
        "es": "El puente AG-UI no acepta nuevas ejecuciones en este momento. Inténtelo más tarde.",
        "fr": "Le pont AG-UI n'accepte pas de nouvelles exécutions pour le moment. Réessayez plus tard.",
        "de": "Die AG-UI-Bridge nimmt derzeit keine neuen Läufe an. Versuchen Sie es später erneut.",
        "pt": "A ponte AG-UI não está aceitando novas execuções no momento. Tente novamente mais tarde.",
    },
    "run_id_used": {
        "en": "The AG-UI run id has already been used.",
        "zh": "该 AG-UI 运行 ID 已被使用。",
        "ja": "この AG-UI の実行 ID はすでに使用されています。",
        "es": "El id de ejecución de AG-UI ya se ha utilizado.",
        "fr": "L'identifiant d'exécution AG-UI a déjà été utilisé.",
        "de": "Die AG-UI-Lauf-ID wurde bereits verwendet.",
        "pt": "O id de execução do AG-UI já foi utilizado.",
    },
    "thread_busy": {
        "en": "The AG-UI thread already has an active run.",
        "zh": "该 AG-UI 线程已有正在进行的运行。",
        "ja": "この AG-UI スレッドにはすでに実行中の処理があります。",
        "es": "El hilo de AG-UI ya tiene una ejecución activa.",
        "fr": "Le fil AG-UI a déjà une exécution en cours.",
        "de": "Der AG-UI-Thread hat bereits einen aktiven Lauf.",
        "pt": "A thread do AG-UI já tem uma execução ativa.",
    },
    "thread_binding_conflict": {
        "en": "The AG-UI thread is already bound to another workspace or caller.",
        "zh": "该 AG-UI 线程已绑定到其他工作区或调用方。",
        "ja": "この AG-UI スレッドはすでに別のワークスペースまたは呼び出し元に関連付けられています。",
        "es": "El hilo de AG-UI ya está vinculado a otro espacio de trabajo o llamante.",
        "fr": "Le fil AG-UI est déjà lié à un autre espace de travail ou appelant.",
        "de": "Der AG-UI-Thread ist bereits an einen anderen Arbeitsbereich oder Aufrufer gebunden.",
        "pt": "A thread do AG-UI já está vinculada a outro espaço de trabalho ou chamador.",
    },
    "resume_required": {
        "en": "The AG-UI thread is waiting for interrupt responses.",
        "zh": "该 AG-UI 线程正在等待中断响应。",
        "ja": "この AG-UI スレッドは割り込みへの応答を待っています。",
        "es": "El hilo de AG-UI está esperando respuestas a interrupciones.",
        "fr": "Le fil AG-UI attend des réponses aux interruptions.",
        "de": "Der AG-UI-Thread wartet auf Antworten zu Unterbrechungen.",
        "pt": "A thread do AG-UI está aguardando respostas a interrupções.",
    },
    "execution_lost": {
        "en": "The execution to resume is no longer available.",
        "zh": "要恢复的执行已不可用。",
        "ja": "再開する実行はもう利用できません。",
        "es": "La ejecución que se quiere reanudar ya no está disponible.",
        "fr": "L'exécution à reprendre n'est plus disponible.",
        "de": "Die fortzusetzende Ausführung ist nicht mehr verfügbar.",
        "pt": "A execução a ser retomada não está mais disponível.",
    },
    "resume_mismatch": {
        "en": "The resume request does not match the interrupted run.",
        "zh": "恢复请求与被中断的运行不匹配。",
        "ja": "再開リクエストが中断された実行と一致しません。",
        "es": "La solicitud de reanudación no coincide con la ejecución interrumpida.",
        "fr": "La demande de reprise ne correspond pas à l'exécution interrompue.",
        "de": "Die Fortsetzungsanfrage passt nicht zum unterbrochenen Lauf.",
        "pt": "A solicitação de retomada não corresponde à execução interrompida.",
    },
    "execution_not_found": {
        "en": "The execution was not found.",
        "zh": "未找到该执行。",
        "ja": "実行が見つかりませんでした。",
        "es": "No se encontró la ejecución.",
        "fr": "L'exécution est introuvable.",
        "de": "Die Ausführung wurde nicht gefunden.",
        "pt": "A execução não foi encontrada.",
    },
    # --- in-stream RUN_ERROR: user message content -----------------------------------------
    "new_run_requires_user_message": {
        "en": "A new run requires a user message.",
        "zh": "新的运行需要一条用户消息。",
        "ja": "新しい実行にはユーザーメッセージが必要です。",
        "es": "Una nueva ejecución requiere un mensaje del usuario.",
        "fr": "Une nouvelle exécution nécessite un message de l'utilisateur.",
        "de": "Ein neuer Lauf erfordert eine Benutzernachricht.",
        "pt": "Uma nova execução requer uma mensagem do usuário.",
    },
    "unsupported_content": {
        "en": "Only text and inline data images are supported.",
        "zh": "仅支持文本和内联数据图片。",
        "ja": "テキストとインラインデータの画像のみサポートされています。",
        "es": "Solo se admiten texto e imágenes con datos en línea.",
        "fr": "Seuls le texte et les images en données intégrées sont pris en charge.",
        "de": "Nur Text und Bilder mit eingebetteten Daten werden unterstützt.",
        "pt": "Somente texto e imagens com dados embutidos são suportados.",
    },
    "remote_media": {
        "en": "Remote media URLs are not supported.",
        "zh": "不支持远程媒体 URL。",
        "ja": "リモートメディアの URL はサポートされていません。",
        "es": "No se admiten URL de medios remotos.",
        "fr": "Les URL de médias distants ne sont pas prises en charge.",
        "de": "URLs zu entfernten Medien werden nicht unterstützt.",
        "pt": "URLs de mídia remota não são suportadas.",
    },
    "image_media_type": {
        "en": "The image media type is not supported.",
        "zh": "不支持该图片媒体类型。",
        "ja": "この画像のメディアタイプはサポートされていません。",
        "es": "El tipo de medio de la imagen no es compatible.",
        "fr": "Le type de média de l'image n'est pas pris en charge.",
        "de": "Der Medientyp des Bildes wird nicht unterstützt.",
        "pt": "O tipo de mídia da imagem não é suportado.",
    },
    "image_base64": {
        "en": "The image data is not valid base64.",
        "zh": "图片数据不是有效的 base64。",
        "ja": "画像データが有効な base64 ではありません。",
        "es": "Los datos de la imagen no son base64 válido.",
        "fr": "Les données de l'image ne sont pas du base64 valide.",
        "de": "Die Bilddaten sind kein gültiges Base64.",
        "pt": "Os dados da imagem não são base64 válido.",
    },
    "image_too_large": {
        "en": "An image exceeds the maximum size.",
        "zh": "有图片超过了最大尺寸。",
        "ja": "画像が最大サイズを超えています。",
        "es": "Una imagen supera el tamaño máximo.",
        "fr": "Une image dépasse la taille maximale.",
        "de": "Ein Bild überschreitet die maximale Größe.",
        "pt": "Uma imagem excede o tamanho máximo.",
    },
    "images_too_large": {
        "en": "The total image content exceeds the maximum size.",
        "zh": "图片内容总量超过了最大尺寸。",
        "ja": "画像の合計サイズが最大サイズを超えています。",
        "es": "El contenido total de las imágenes supera el tamaño máximo.",
        "fr": "Le contenu total des images dépasse la taille maximale.",
        "de": "Der gesamte Bildinhalt überschreitet die maximale Größe.",
        "pt": "O conteúdo total das imagens excede o tamanho máximo.",
    },
    "image_invalid": {
        "en": "The image data is invalid.",
        "zh": "图片数据无效。",
        "ja": "画像データが無効です。",
        "es": "Los datos de la imagen no son válidos.",
        "fr": "Les données de l'image ne sont pas valides.",
        "de": "Die Bilddaten sind ungültig.",
        "pt": "Os dados da imagem são inválidos.",
    },
    "user_content_invalid": {
        "en": "The user message content is invalid.",
        "zh": "用户消息内容无效。",
        "ja": "ユーザーメッセージの内容が無効です。",
        "es": "El contenido del mensaje del usuario no es válido.",
        "fr": "Le contenu du message de l'utilisateur n'est pas valide.",
        "de": "Der Inhalt der Benutzernachricht ist ungültig.",
        "pt": "O conteúdo da mensagem do usuário é inválido.",
    },
    # --- in-stream RUN_ERROR: resume and execution -----------------------------------------
    "task_unavailable": {
        "en": "The A2A task to resume is unavailable.",
        "zh": "要恢复的 A2A 任务不可用。",
        "ja": "再開する A2A タスクを利用できません。",
        "es": "La tarea A2A que se quiere reanudar no está disponible.",
        "fr": "La tâche A2A à reprendre n'est pas disponible.",
        "de": "Die fortzusetzende A2A-Aufgabe ist nicht verfügbar.",
        "pt": "A tarefa A2A a ser retomada não está disponível.",
    },
    "session_unavailable": {
        "en": "The iac-code session to resume is unavailable.",
        "zh": "要恢复的 iac-code 会话不可用。",
        "ja": "再開する iac-code セッションを利用できません。",
        "es": "La sesión de iac-code que se quiere reanudar no está disponible.",
        "fr": "La session iac-code à reprendre n'est pas disponible.",
        "de": "Die fortzusetzende iac-code-Sitzung ist nicht verfügbar.",
        "pt": "A sessão do iac-code a ser retomada não está disponível.",
    },
    "resume_duplicate_ids": {
        "en": "The resume contains duplicate interrupt ids.",
        "zh": "恢复请求中包含重复的中断 ID。",
        "ja": "再開リクエストに重複した割り込み ID が含まれています。",
        "es": "La reanudación contiene ids de interrupción duplicados.",
        "fr": "La reprise contient des identifiants d'interruption en double.",
        "de": "Die Fortsetzung enthält doppelte Unterbrechungs-IDs.",
        "pt": "A retomada contém ids de interrupção duplicados.",
    },
    "resume_incomplete": {
        "en": "The resume must resolve every pending interrupt exactly once.",
        "zh": "恢复请求必须对每个待处理的中断恰好答复一次。",
        "ja": "再開リクエストでは、保留中のすべての割り込みにちょうど一度ずつ応答する必要があります。",
        "es": "La reanudación debe resolver cada interrupción pendiente exactamente una vez.",
        "fr": "La reprise doit traiter chaque interruption en attente exactement une fois.",
        "de": "Die Fortsetzung muss jede ausstehende Unterbrechung genau einmal beantworten.",
        "pt": "A retomada deve resolver cada interrupção pendente exatamente uma vez.",
    },
    "unknown_interrupt": {
        "en": "The resume references an unknown interrupt.",
        "zh": "恢复请求引用了未知的中断。",
        "ja": "再開リクエストが不明な割り込みを参照しています。",
        "es": "La reanudación hace referencia a una interrupción desconocida.",
        "fr": "La reprise fait référence à une interruption inconnue.",
        "de": "Die Fortsetzung verweist auf eine unbekannte Unterbrechung.",
        "pt": "A retomada faz referência a uma interrupção desconhecida.",
    },
    "resume_payload_required": {
        "en": "A resolved interrupt requires a payload.",
        "zh": "已解决的中断需要提供载荷。",
        "ja": "解決済みの割り込みにはペイロードが必要です。",
        "es": "Una interrupción resuelta requiere una carga útil.",
        "fr": "Une interruption résolue nécessite une charge utile.",
        "de": "Eine beantwortete Unterbrechung erfordert eine Nutzlast.",
        "pt": "Uma interrupção resolvida requer uma carga útil.",
    },
    "resume_payload_invalid": {
        "en": "The interrupt response payload is invalid.",
        "zh": "中断响应的载荷无效。",
        "ja": "割り込み応答のペイロードが無効です。",
        "es": "La carga útil de la respuesta a la interrupción no es válida.",
        "fr": "La charge utile de la réponse à l'interruption n'est pas valide.",
        "de": "Die Nutzlast der Antwort auf die Unterbrechung ist ungültig.",
        "pt": "A carga útil da resposta à interrupção é inválida.",
    },
    "resume_no_answer": {
        "en": "The interrupt response does not contain an answer.",
        "zh": "中断响应中不包含答案。",
        "ja": "割り込み応答に回答が含まれていません。",
        "es": "La respuesta a la interrupción no contiene una respuesta.",
        "fr": "La réponse à l'interruption ne contient aucune réponse.",
        "de": "Die Antwort auf die Unterbrechung enthält keine Antwort.",
        "pt": "A resposta à interrupção não contém uma resposta.",
    },
    "resume_already_applied": {
        "en": "The interrupt response has already been applied.",
        "zh": "该中断响应已被应用。",
        "ja": "この割り込み応答はすでに適用されています。",
        "es": "La respuesta a la interrupción ya se ha aplicado.",
        "fr": "La réponse à l'interruption a déjà été appliquée.",
        "de": "Die Antwort auf die Unterbrechung wurde bereits angewendet.",
        "pt": "A resposta à interrupção já foi aplicada.",
    },
    "execution_expired": {
        "en": "The interrupt has expired and can no longer be answered.",
        "zh": "该中断已过期，无法再答复。",
        "ja": "割り込みの有効期限が切れたため、応答できなくなりました。",
        "es": "La interrupción ha caducado y ya no se puede responder.",
        "fr": "L'interruption a expiré et ne peut plus recevoir de réponse.",
        "de": "Die Unterbrechung ist abgelaufen und kann nicht mehr beantwortet werden.",
        "pt": "A interrupção expirou e não pode mais ser respondida.",
    },
    "task_mapping_failed": {
        "en": "The execution mapping could not be committed.",
        "zh": "无法提交执行映射。",
        "ja": "実行のマッピングを確定できませんでした。",
        "es": "No se pudo confirmar la asignación de la ejecución.",
        "fr": "La correspondance de l'exécution n'a pas pu être enregistrée.",
        "de": "Die Zuordnung der Ausführung konnte nicht gespeichert werden.",
        "pt": "Não foi possível confirmar o mapeamento da execução.",
    },
    "session_mapping_failed": {
        "en": "The execution session mapping could not be committed.",
        "zh": "无法提交执行会话映射。",
        "ja": "実行セッションのマッピングを確定できませんでした。",
        "es": "No se pudo confirmar la asignación de la sesión de ejecución.",
        "fr": "La correspondance de la session d'exécution n'a pas pu être enregistrée.",
        "de": "Die Zuordnung der Ausführungssitzung konnte nicht gespeichert werden.",
        "pt": "Não foi possível confirmar o mapeamento da sessão de execução.",
    },
    "interrupt_commit_failed": {
        "en": "The interrupted execution state could not be committed.",
        "zh": "无法提交被中断执行的状态。",
        "ja": "中断された実行の状態を確定できませんでした。",
        "es": "No se pudo confirmar el estado de la ejecución interrumpida.",
        "fr": "L'état de l'exécution interrompue n'a pas pu être enregistré.",
        "de": "Der Zustand der unterbrochenen Ausführung konnte nicht gespeichert werden.",
        "pt": "Não foi possível confirmar o estado da execução interrompida.",
    },
    "answer_commit_failed": {
        "en": "The accepted interrupt response could not be committed.",
        "zh": "无法提交已被接受的中断响应。",
        "ja": "受け入れられた割り込み応答を確定できませんでした。",
        "es": "No se pudo confirmar la respuesta a la interrupción aceptada.",
        "fr": "La réponse acceptée à l'interruption n'a pas pu être enregistrée.",
        "de": "Die angenommene Antwort auf die Unterbrechung konnte nicht gespeichert werden.",
        "pt": "Não foi possível confirmar a resposta aceita à interrupção.",
    },
    "session_backup_not_ready": {
        "en": "Session backup is still synchronizing. Retry after 3 seconds.",
        "zh": "会话备份仍在同步中。请在 3 秒后重试。",
        "ja": "セッションのバックアップはまだ同期中です。3 秒後に再試行してください。",
        "es": "La copia de seguridad de la sesión aún se está sincronizando. Inténtelo de nuevo en 3 segundos.",
        "fr": "La sauvegarde de la session est encore en cours de synchronisation. Réessayez dans 3 secondes.",
        "de": "Die Sitzungssicherung wird noch synchronisiert. Versuchen Sie es in 3 Sekunden erneut.",
        "pt": "O backup da sessão ainda está sincronizando. Tente novamente em 3 segundos.",
    },
    "a2a_unavailable": {
        "en": "The local A2A execution service is unavailable.",
        "zh": "本地 A2A 执行服务不可用。",
        "ja": "ローカルの A2A 実行サービスを利用できません。",
        "es": "El servicio local de ejecución A2A no está disponible.",
        "fr": "Le service local d'exécution A2A n'est pas disponible.",
        "de": "Der lokale A2A-Ausführungsdienst ist nicht verfügbar.",
        "pt": "O serviço local de execução A2A não está disponível.",
    },
    "a2a_rejected_answer": {
        "en": "The local A2A execution service rejected the interrupt response.",
        "zh": "本地 A2A 执行服务拒绝了中断响应。",
        "ja": "ローカルの A2A 実行サービスが割り込み応答を拒否しました。",
        "es": "El servicio local de ejecución A2A rechazó la respuesta a la interrupción.",
        "fr": "Le service local d'exécution A2A a rejeté la réponse à l'interruption.",
        "de": "Der lokale A2A-Ausführungsdienst hat die Antwort auf die Unterbrechung abgelehnt.",
        "pt": "O serviço local de execução A2A rejeitou a resposta à interrupção.",
    },
    "a2a_answer_not_accepted": {
        "en": "The A2A interrupt response was not accepted.",
        "zh": "A2A 中断响应未被接受。",
        "ja": "A2A の割り込み応答は受け入れられませんでした。",
        "es": "La respuesta a la interrupción A2A no fue aceptada.",
        "fr": "La réponse à l'interruption A2A n'a pas été acceptée.",
        "de": "Die A2A-Antwort auf die Unterbrechung wurde nicht angenommen.",
        "pt": "A resposta à interrupção A2A não foi aceita.",
    },
    "a2a_permission_not_accepted": {
        "en": "The A2A permission response was not accepted.",
        "zh": "A2A 权限响应未被接受。",
        "ja": "A2A の権限応答は受け入れられませんでした。",
        "es": "La respuesta de permiso A2A no fue aceptada.",
        "fr": "La réponse d'autorisation A2A n'a pas été acceptée.",
        "de": "Die A2A-Berechtigungsantwort wurde nicht angenommen.",
        "pt": "A resposta de permissão A2A não foi aceita.",
    },
    "context_changed": {
        "en": "The A2A context identity changed unexpectedly.",
        "zh": "A2A 上下文标识意外发生了变化。",
        "ja": "A2A コンテキストの識別子が予期せず変更されました。",
        "es": "La identidad del contexto A2A cambió inesperadamente.",
        "fr": "L'identité du contexte A2A a changé de manière inattendue.",
        "de": "Die Identität des A2A-Kontexts hat sich unerwartet geändert.",
        "pt": "A identidade do contexto A2A mudou inesperadamente.",
    },
    "task_changed": {
        "en": "The A2A task identity changed unexpectedly.",
        "zh": "A2A 任务标识意外发生了变化。",
        "ja": "A2A タスクの識別子が予期せず変更されました。",
        "es": "La identidad de la tarea A2A cambió inesperadamente.",
        "fr": "L'identité de la tâche A2A a changé de manière inattendue.",
        "de": "Die Identität der A2A-Aufgabe hat sich unerwartet geändert.",
        "pt": "A identidade da tarefa A2A mudou inesperadamente.",
    },
    "session_changed": {
        "en": "The iac-code session identity changed unexpectedly.",
        "zh": "iac-code 会话标识意外发生了变化。",
        "ja": "iac-code セッションの識別子が予期せず変更されました。",
        "es": "La identidad de la sesión de iac-code cambió inesperadamente.",
        "fr": "L'identité de la session iac-code a changé de manière inattendue.",
        "de": "Die Identität der iac-code-Sitzung hat sich unerwartet geändert.",
        "pt": "A identidade da sessão do iac-code mudou inesperadamente.",
    },
    "task_mismatch": {
        "en": "The A2A task identity does not match the interrupted run.",
        "zh": "A2A 任务标识与被中断的运行不匹配。",
        "ja": "A2A タスクの識別子が中断された実行と一致しません。",
        "es": "La identidad de la tarea A2A no coincide con la ejecución interrumpida.",
        "fr": "L'identité de la tâche A2A ne correspond pas à l'exécution interrompue.",
        "de": "Die Identität der A2A-Aufgabe passt nicht zum unterbrochenen Lauf.",
        "pt": "A identidade da tarefa A2A não corresponde à execução interrompida.",
    },
    "interrupt_other_task": {
        "en": "An interrupt belongs to another A2A task.",
        "zh": "某个中断属于另一个 A2A 任务。",
        "ja": "割り込みが別の A2A タスクに属しています。",
        "es": "Una interrupción pertenece a otra tarea A2A.",
        "fr": "Une interruption appartient à une autre tâche A2A.",
        "de": "Eine Unterbrechung gehört zu einer anderen A2A-Aufgabe.",
        "pt": "Uma interrupção pertence a outra tarefa A2A.",
    },
    "interrupt_other_context": {
        "en": "An interrupt belongs to another A2A context.",
        "zh": "某个中断属于另一个 A2A 上下文。",
        "ja": "割り込みが別の A2A コンテキストに属しています。",
        "es": "Una interrupción pertenece a otro contexto A2A.",
        "fr": "Une interruption appartient à un autre contexte A2A.",
        "de": "Eine Unterbrechung gehört zu einem anderen A2A-Kontext.",
        "pt": "Uma interrupção pertence a outro contexto A2A.",
    },
    "execution_failed": {
        "en": "The A2A execution failed.",
        "zh": "A2A 执行失败。",
        "ja": "A2A の実行に失敗しました。",
        "es": "La ejecución A2A falló.",
        "fr": "L'exécution A2A a échoué.",
        "de": "Die A2A-Ausführung ist fehlgeschlagen.",
        "pt": "A execução A2A falhou.",
    },
    "cancelled": {
        "en": "The execution was cancelled.",
        "zh": "执行已被取消。",
        "ja": "実行はキャンセルされました。",
        "es": "La ejecución fue cancelada.",
        "fr": "L'exécution a été annulée.",
        "de": "Die Ausführung wurde abgebrochen.",
        "pt": "A execução foi cancelada.",
    },
    "cancelled_by_answer": {
        "en": "The execution was cancelled by the interrupt response.",
        "zh": "执行已因中断响应而被取消。",
        "ja": "割り込み応答により実行はキャンセルされました。",
        "es": "La ejecución fue cancelada por la respuesta a la interrupción.",
        "fr": "L'exécution a été annulée par la réponse à l'interruption.",
        "de": "Die Ausführung wurde durch die Antwort auf die Unterbrechung abgebrochen.",
        "pt": "A execução foi cancelada pela resposta à interrupção.",
    },
    "server_shutdown": {
        "en": "The AG-UI server is shutting down; the execution was cancelled.",
        "zh": "AG-UI 服务器正在关闭；执行已被取消。",
        "ja": "AG-UI サーバーがシャットダウン中のため、実行はキャンセルされました。",
        "es": "El servidor AG-UI se está apagando; la ejecución fue cancelada.",
        "fr": "Le serveur AG-UI est en cours d'arrêt ; l'exécution a été annulée.",
        "de": "Der AG-UI-Server wird heruntergefahren; die Ausführung wurde abgebrochen.",
        "pt": "O servidor AG-UI está sendo encerrado; a execução foi cancelada.",
    },
    "internal_error": {
        "en": "An internal error occurred.",
        "zh": "发生了内部错误。",
        "ja": "内部エラーが発生しました。",
        "es": "Se produjo un error interno.",
        "fr": "Une erreur interne s'est produite.",
        "de": "Ein interner Fehler ist aufgetreten.",
        "pt": "Ocorreu um erro interno.",
    },
    # --- interrupt fallback texts (language = the interrupt's own) ------------------------
    "permission_required": {
        "en": "Permission required",
        "zh": "需要授权",
        "ja": "許可が必要です",
        "es": "Se requiere permiso",
        "fr": "Autorisation requise",
        "de": "Berechtigung erforderlich",
        "pt": "Permissão necessária",
    },
    "input_required": {
        "en": "Input required",
        "zh": "需要输入",
        "ja": "入力が必要です",
        "es": "Se requiere una entrada",
        "fr": "Saisie requise",
        "de": "Eingabe erforderlich",
        "pt": "Entrada necessária",
    },
    # --- D3 field rules: always name the field ---------------------------------------------
    "field_required": {
        "en": "{field} is required.",
        "zh": "{field} 为必填项。",
        "ja": "{field} は必須です。",
        "es": "{field} es obligatorio.",
        "fr": "{field} est obligatoire.",
        "de": "{field} ist erforderlich.",
        "pt": "{field} é obrigatório.",
    },
    "field_unknown": {
        "en": "{field} is not a known field.",
        "zh": "{field} 不是已知字段。",
        "ja": "{field} は既知のフィールドではありません。",
        "es": "{field} no es un campo conocido.",
        "fr": "{field} n'est pas un champ connu.",
        "de": "{field} ist kein bekanntes Feld.",
        "pt": "{field} não é um campo conhecido.",
    },
    "field_null": {
        "en": "{field} must not be null.",
        "zh": "{field} 不能为 null。",
        "ja": "{field} に null は指定できません。",
        "es": "{field} no puede ser null.",
        "fr": "{field} ne doit pas être null.",
        "de": "{field} darf nicht null sein.",
        "pt": "{field} não pode ser null.",
    },
    "field_conflict": {
        "en": "{field} and {other} name the same field; send only one of them.",
        "zh": "{field} 与 {other} 表示同一个字段；只能发送其中一个。",
        "ja": "{field} と {other} は同じフィールドを表します。どちらか一方だけを送信してください。",
        "es": "{field} y {other} designan el mismo campo; envíe solo uno de ellos.",
        "fr": "{field} et {other} désignent le même champ ; n'en envoyez qu'un seul.",
        "de": "{field} und {other} bezeichnen dasselbe Feld; senden Sie nur eines davon.",
        "pt": "{field} e {other} designam o mesmo campo; envie apenas um deles.",
    },
    "field_type_string": {
        "en": "{field} must be a string.",
        "zh": "{field} 必须是字符串。",
        "ja": "{field} は文字列である必要があります。",
        "es": "{field} debe ser una cadena de texto.",
        "fr": "{field} doit être une chaîne de caractères.",
        "de": "{field} muss eine Zeichenkette sein.",
        "pt": "{field} deve ser uma string.",
    },
    "field_type_integer": {
        "en": "{field} must be an integer.",
        "zh": "{field} 必须是整数。",
        "ja": "{field} は整数である必要があります。",
        "es": "{field} debe ser un número entero.",
        "fr": "{field} doit être un nombre entier.",
        "de": "{field} muss eine ganze Zahl sein.",
        "pt": "{field} deve ser um número inteiro.",
    },
    "field_type_boolean": {
        "en": "{field} must be a boolean (true or false).",
        "zh": "{field} 必须是布尔值（true 或 false）。",
        "ja": "{field} は真偽値（true または false）である必要があります。",
        "es": "{field} debe ser un booleano (true o false).",
        "fr": "{field} doit être un booléen (true ou false).",
        "de": "{field} muss ein boolescher Wert sein (true oder false).",
        "pt": "{field} deve ser um booleano (true ou false).",
    },
    "field_type_object": {
        "en": "{field} must be a JSON object.",
        "zh": "{field} 必须是 JSON 对象。",
        "ja": "{field} は JSON オブジェクトである必要があります。",
        "es": "{field} debe ser un objeto JSON.",
        "fr": "{field} doit être un objet JSON.",
        "de": "{field} muss ein JSON-Objekt sein.",
        "pt": "{field} deve ser um objeto JSON.",
    },
    "field_type_array": {
        "en": "{field} must be an array.",
        "zh": "{field} 必须是数组。",
        "ja": "{field} は配列である必要があります。",
        "es": "{field} debe ser un arreglo.",
        "fr": "{field} doit être un tableau.",
        "de": "{field} muss ein Array sein.",
        "pt": "{field} deve ser um array.",
    },
    "field_type_content": {
        "en": "{field} must be a string or an array of content parts.",
        "zh": "{field} 必须是字符串或内容部分的数组。",
        "ja": "{field} は文字列またはコンテンツパートの配列である必要があります。",
        "es": "{field} debe ser una cadena de texto o un arreglo de partes de contenido.",
        "fr": "{field} doit être une chaîne de caractères ou un tableau de parties de contenu.",
        "de": "{field} muss eine Zeichenkette oder ein Array von Inhaltsteilen sein.",
        "pt": "{field} deve ser uma string ou um array de partes de conteúdo.",
    },
    "field_enum": {
        "en": "{field} must be one of: {choices}.",
        "zh": "{field} 必须是以下值之一：{choices}。",
        "ja": "{field} は次のいずれかである必要があります: {choices}。",
        "es": "{field} debe ser uno de: {choices}.",
        "fr": "{field} doit être l'une des valeurs suivantes : {choices}.",
        "de": "{field} muss einer der folgenden Werte sein: {choices}.",
        "pt": "{field} deve ser um de: {choices}.",
    },
    "field_length": {
        "en": "{field} must be between {min} and {max} characters.",
        "zh": "{field} 的长度必须在 {min} 到 {max} 个字符之间。",
        "ja": "{field} は {min} 文字以上 {max} 文字以下である必要があります。",
        "es": "{field} debe tener entre {min} y {max} caracteres.",
        "fr": "{field} doit contenir entre {min} et {max} caractères.",
        "de": "{field} muss zwischen {min} und {max} Zeichen lang sein.",
        "pt": "{field} deve ter entre {min} e {max} caracteres.",
    },
    "field_positive": {
        "en": "{field} must be a positive integer.",
        "zh": "{field} 必须是正整数。",
        "ja": "{field} は正の整数である必要があります。",
        "es": "{field} debe ser un número entero positivo.",
        "fr": "{field} doit être un nombre entier positif.",
        "de": "{field} muss eine positive ganze Zahl sein.",
        "pt": "{field} deve ser um número inteiro positivo.",
    },
    "field_invalid": {
        "en": "{field} is invalid.",
        "zh": "{field} 无效。",
        "ja": "{field} が無効です。",
        "es": "{field} no es válido.",
        "fr": "{field} n'est pas valide.",
        "de": "{field} ist ungültig.",
        "pt": "{field} é inválido.",
    },
    "schema_version": {
        "en": "{field} must be the integer 1.",
        "zh": "{field} 必须是整数 1。",
        "ja": "{field} は整数 1 である必要があります。",
        "es": "{field} debe ser el número entero 1.",
        "fr": "{field} doit être l'entier 1.",
        "de": "{field} muss die ganze Zahl 1 sein.",
        "pt": "{field} deve ser o número inteiro 1.",
    },
    "forwarded_props_only_iaccode": {
        "en": "forwardedProps may only contain iacCode; {field} is not allowed.",
        "zh": "forwardedProps 只能包含 iacCode；不允许 {field}。",
        "ja": "forwardedProps には iacCode のみを含めることができます。{field} は使用できません。",
        "es": "forwardedProps solo puede contener iacCode; {field} no está permitido.",
        "fr": "forwardedProps ne peut contenir que iacCode ; {field} n'est pas autorisé.",
        "de": "forwardedProps darf nur iacCode enthalten; {field} ist nicht erlaubt.",
        "pt": "forwardedProps só pode conter iacCode; {field} não é permitido.",
    },
    # --- secure by default (D16) -----------------------------------------------------------
    "host_not_allowed": {
        "en": "Without an auth token this server only answers requests addressed to localhost, 127.0.0.1 or [::1].",
        "zh": "未配置认证令牌时，此服务器只响应发往 localhost、127.0.0.1 或 [::1] 的请求。",
        "ja": (
            "認証トークンが設定されていない場合、このサーバーは localhost、127.0.0.1 または [::1] "
            "宛てのリクエストにのみ応答します。"
        ),
        "es": (
            "Sin un token de autenticación, este servidor solo responde a solicitudes dirigidas a "
            "localhost, 127.0.0.1 o [::1]."
        ),
        "fr": (
            "Sans jeton d'authentification, ce serveur ne répond qu'aux requêtes adressées à "
            "localhost, 127.0.0.1 ou [::1]."
        ),
        "de": "Ohne Auth-Token beantwortet dieser Server nur Anfragen an localhost, 127.0.0.1 oder [::1].",
        "pt": (
            "Sem um token de autenticação, este servidor só responde a pedidos dirigidos a "
            "localhost, 127.0.0.1 ou [::1]."
        ),
    },
    "run_not_found": {
        "en": "No run with this id is known for this thread.",
        "zh": "此线程中没有该 ID 的运行。",
        "ja": "このスレッドにこの ID の実行はありません。",
        "es": "No se conoce ninguna ejecución con este id en este hilo.",
        "fr": "Aucune exécution avec cet identifiant n'est connue pour ce fil.",
        "de": "Für diesen Thread ist kein Lauf mit dieser ID bekannt.",
        "pt": "Nenhuma execução com este id é conhecida para esta thread.",
    },
    "replay_expired": {
        "en": "The events of this run are no longer kept; it cannot be replayed.",
        "zh": "此运行的事件已不再保留，无法重放。",
        "ja": "この実行のイベントはもう保持されていないため、再生できません。",
        "es": "Los eventos de esta ejecución ya no se conservan; no se puede reproducir.",
        "fr": "Les événements de cette exécution ne sont plus conservés ; elle ne peut pas être rejouée.",
        "de": "Die Ereignisse dieses Laufs werden nicht mehr aufbewahrt; er kann nicht wiedergegeben werden.",
        "pt": "Os eventos desta execução não são mais mantidos; ela não pode ser reproduzida.",
    },
    "replay_truncated": {
        "en": "This run's stream outgrew the replay size limit; it cannot be replayed.",
        "zh": "此运行的流超出了重放大小限制，无法重放。",
        "ja": "この実行のストリームは再生サイズの上限を超えたため、再生できません。",
        "es": "El flujo de esta ejecución superó el límite de tamaño de reproducción; no se puede reproducir.",
        "fr": "Le flux de cette exécution a dépassé la taille maximale de relecture ; il ne peut pas être rejoué.",
        "de": (
            "Der Stream dieses Laufs hat die Größengrenze für die Wiedergabe überschritten; "
            "er kann nicht wiedergegeben werden."
        ),
        "pt": "O fluxo desta execução excedeu o limite de tamanho de reprodução; ela não pode ser reproduzida.",
    },
    "replay_cursor_invalid": {
        "en": "The event cursor (Last-Event-ID or after) must be a non-negative integer.",
        "zh": "事件游标（Last-Event-ID 或 after）必须是非负整数。",
        "ja": "イベントカーソル（Last-Event-ID または after）は 0 以上の整数でなければなりません。",
        "es": "El cursor de eventos (Last-Event-ID o after) debe ser un entero no negativo.",
        "fr": "Le curseur d'événements (Last-Event-ID ou after) doit être un entier positif ou nul.",
        "de": "Der Ereignis-Cursor (Last-Event-ID oder after) muss eine nicht negative ganze Zahl sein.",
        "pt": "O cursor de eventos (Last-Event-ID ou after) deve ser um inteiro não negativo.",
    },
    "replay_cursor_out_of_range": {
        "en": "The event cursor is beyond the last event of this run.",
        "zh": "事件游标超出了此运行的最后一个事件。",
        "ja": "イベントカーソルがこの実行の最後のイベントを超えています。",
        "es": "El cursor de eventos está más allá del último evento de esta ejecución.",
        "fr": "Le curseur d'événements dépasse le dernier événement de cette exécution.",
        "de": "Der Ereignis-Cursor liegt hinter dem letzten Ereignis dieses Laufs.",
        "pt": "O cursor de eventos está além do último evento desta execução.",
    },
    "reattach_ros_required": {
        "en": "rosInvocationId is required as a query parameter.",
        "zh": "必须以查询参数提供 rosInvocationId。",
        "ja": "rosInvocationId をクエリパラメーターとして指定する必要があります。",
        "es": "rosInvocationId es obligatorio como parámetro de consulta.",
        "fr": "rosInvocationId est obligatoire comme paramètre de requête.",
        "de": "rosInvocationId ist als Abfrageparameter erforderlich.",
        "pt": "rosInvocationId é obrigatório como parâmetro de consulta.",
    },
    "reattach_window_expired": {
        "en": "No client reattached within the reattach window; the execution was cancelled.",
        "zh": "在重新连接窗口内没有客户端重新连接；执行已被取消。",
        "ja": "再接続期間内にクライアントが再接続しなかったため、実行はキャンセルされました。",
        "es": "Ningún cliente se volvió a conectar dentro de la ventana de reconexión; la ejecución fue cancelada.",
        "fr": "Aucun client ne s'est reconnecté dans la fenêtre de reconnexion ; l'exécution a été annulée.",
        "de": (
            "Innerhalb des Wiederverbindungsfensters hat sich kein Client erneut verbunden; "
            "die Ausführung wurde abgebrochen."
        ),
        "pt": "Nenhum cliente se reconectou dentro da janela de reconexão; a execução foi cancelada.",
    },
    "client_disconnected": {
        "en": "The client went away; the execution was cancelled.",
        "zh": "客户端已断开连接；执行已被取消。",
        "ja": "クライアントが切断されたため、実行はキャンセルされました。",
        "es": "El cliente se desconectó; la ejecución fue cancelada.",
        "fr": "Le client s'est déconnecté ; l'exécution a été annulée.",
        "de": "Der Client hat die Verbindung getrennt; die Ausführung wurde abgebrochen.",
        "pt": "O cliente se desconectou; a execução foi cancelada.",
    },
    "run_worker_lost": {
        "en": "The server process running this execution stopped; the execution was cancelled.",
        "zh": "运行此执行的服务器进程已停止；执行已被取消。",
        "ja": "この実行を処理していたサーバープロセスが停止したため、実行はキャンセルされました。",
        "es": "El proceso del servidor que ejecutaba esta ejecución se detuvo; la ejecución fue cancelada.",
        "fr": "Le processus serveur qui exécutait cette exécution s'est arrêté ; l'exécution a été annulée.",
        "de": "Der Serverprozess, der diese Ausführung ausführte, wurde beendet; die Ausführung wurde abgebrochen.",
        "pt": "O processo do servidor que executava esta execução parou; a execução foi cancelada.",
    },
}

#: Texts that are genuinely the same in English and another language (none today).
IDENTICAL_TO_ENGLISH_ALLOWED: Final[frozenset[tuple[str, str]]] = frozenset()


# --------------------------------------------------------------------------------------------
# Lookup


class _KeepMissing(dict[str, str]):
    """``format_map`` helper: an absent placeholder stays visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _strict_keys() -> bool:
    """Unknown keys raise under pytest (typos fail loudly) or with AGUI_BRIDGE_I18N_STRICT=1."""
    return "PYTEST_CURRENT_TEST" in os.environ or os.environ.get("AGUI_BRIDGE_I18N_STRICT") == "1"


def message_template(key: str, language: str) -> str:
    """The raw template of ``key`` in ``language`` (English if the language is unsupported).

    Raises KeyError for an unknown key.
    """
    entry = CATALOG[key]
    return entry.get(normalise_language(language) or SOURCE_LANGUAGE, entry[SOURCE_LANGUAGE])


def translate(key: str, language: str, **params: str) -> str:
    """Localised text of ``key`` with ``params`` filled in; unsupported language -> English.

    An unknown key raises KeyError in tests (see ``_strict_keys``); at runtime it yields the
    localised "internal error" text so that a programming error never becomes a 500 (D5).
    """
    try:
        template = message_template(key, language)
    except KeyError:
        if _strict_keys():
            raise
        template = message_template(FALLBACK_KEY, language)
    return template.format_map(_KeepMissing(params))


def _fixed_texts() -> dict[str, str]:
    texts: dict[str, str] = {}
    for key, entry in CATALOG.items():
        for text in entry.values():
            if "{" not in text:
                texts.setdefault(text, key)
    return texts


_FIXED_TEXTS: Final = _fixed_texts()


def key_for_message(text: str) -> str | None:
    """The catalogue key whose fixed text (in any language) is exactly ``text``, else None."""
    return _FIXED_TEXTS.get(text)


def is_catalog_message(text: str) -> bool:
    """True for one of our fixed public messages (the 1.7 allow-list for translating RUN_ERROR)."""
    return text in _FIXED_TEXTS


def localise_text(text: str, language: str) -> str:
    """Translate ``text`` if it is one of our fixed messages, else pass it through untranslated."""
    key = key_for_message(text)
    return text if key is None else translate(key, language)
