"""Language identification on short texts: py3langid vs lingua-language-detector (accuracy, time, size).

Short questions and answers of the kind ragnb generates, written for this bench in seven languages, many of them
with English technical terms inside (the hard case: a French question about the "Batch API"). Prints, per library
and setting, the share of texts identified as their language, by length in words, the time per text and the size of
the installed package. Run: python bench/langid.py
"""
import time, importlib.util
from pathlib import Path

TEXTS = {
'en': ["What is the rate limit of the Batch API?", "How do I stream responses from the Chat Completions endpoint?",
       "Which embedding model is cheapest for semantic search over long documents?", "why does my function call return invalid json",
       "When should you fine-tune a model instead of writing a better prompt?", "What does the temperature parameter change?",
       "how to count tokens before sending a request", "Which vector databases does the cookbook show with embeddings?",
       "Responses are returned within 24 hours.", "The evidence is copied word for word from the passage.",
       "retry with exponential backoff", "A score of 3 in every area",
       "within 24 hours", "the cheapest model", "use smaller chunks", "only the first page"],
'fr': ["Quelle est la limite de débit de l'API Batch ?", "Comment diffuser les réponses du point de terminaison Chat Completions ?",
       "Quel modèle d'embedding coûte le moins cher pour la recherche sémantique ?", "pourquoi mon appel de fonction renvoie un json invalide",
       "Quand faut-il affiner un modèle plutôt que d'écrire un meilleur prompt ?", "Que change le paramètre temperature ?",
       "comment compter les tokens avant d'envoyer une requête", "Quelles bases de données vectorielles le livre de recettes présente-t-il ?",
       "Les réponses sont renvoyées en moins de 24 heures.", "La preuve est copiée mot pour mot depuis le passage.",
       "réessayer avec un délai exponentiel", "Une note de 3 dans chaque domaine",
       "en moins de 24 heures", "le modèle le moins cher", "utiliser des morceaux plus petits", "seulement la première page"],
'de': ["Wie hoch ist das Ratenlimit der Batch API?", "Wie streame ich Antworten vom Chat-Completions-Endpunkt?",
       "Welches Embedding-Modell ist für die semantische Suche am günstigsten?", "warum gibt mein Funktionsaufruf ungültiges json zurück",
       "Wann sollte man ein Modell feinabstimmen, statt einen besseren Prompt zu schreiben?", "Was ändert der Parameter temperature?",
       "wie zählt man Tokens vor dem Senden einer Anfrage", "Welche Vektordatenbanken zeigt das Kochbuch mit Einbettungen?",
       "Antworten kommen innerhalb von 24 Stunden zurück.", "Der Beleg wird wörtlich aus dem Abschnitt kopiert.",
       "mit exponentiellem Backoff erneut versuchen", "Eine Bewertung von 3 in jedem Bereich",
       "innerhalb von 24 Stunden", "das günstigste Modell", "kleinere Abschnitte verwenden", "nur die erste Seite"],
'es': ["¿Cuál es el límite de velocidad de la API Batch?", "¿Cómo transmito las respuestas del endpoint de Chat Completions?",
       "¿Qué modelo de embeddings es el más barato para la búsqueda semántica?", "por qué mi llamada a función devuelve json inválido",
       "¿Cuándo conviene ajustar un modelo en lugar de escribir un prompt mejor?", "¿Qué cambia el parámetro temperature?",
       "cómo contar los tokens antes de enviar una solicitud", "¿Qué bases de datos vectoriales muestra el recetario?",
       "Las respuestas se devuelven en menos de 24 horas.", "La evidencia se copia palabra por palabra del pasaje.",
       "reintentar con espera exponencial", "Una puntuación de 3 en cada área",
       "en menos de 24 horas", "el modelo más barato", "usar fragmentos más pequeños", "solo la primera página"],
'it': ["Qual è il limite di frequenza della Batch API?", "Come posso trasmettere in streaming le risposte dell'endpoint Chat Completions?",
       "Quale modello di embedding costa meno per la ricerca semantica?", "perché la mia chiamata di funzione restituisce json non valido",
       "Quando conviene addestrare un modello invece di scrivere un prompt migliore?", "Che cosa cambia il parametro temperature?",
       "come contare i token prima di inviare una richiesta", "Quali database vettoriali mostra il ricettario?",
       "Le risposte vengono restituite entro 24 ore.", "La prova è copiata parola per parola dal passaggio.",
       "riprovare con attesa esponenziale", "Un punteggio di 3 in ogni area",
       "entro 24 ore", "il modello più economico", "usare frammenti più piccoli", "solo la prima pagina"],
'pt': ["Qual é o limite de taxa da API Batch?", "Como transmito as respostas do endpoint de Chat Completions?",
       "Qual modelo de embeddings é mais barato para busca semântica?", "por que minha chamada de função retorna json inválido",
       "Quando devo ajustar um modelo em vez de escrever um prompt melhor?", "O que muda o parâmetro temperature?",
       "como contar os tokens antes de enviar uma requisição", "Quais bancos de dados vetoriais o livro de receitas mostra?",
       "As respostas são devolvidas em até 24 horas.", "A evidência é copiada palavra por palavra do trecho.",
       "tentar novamente com espera exponencial", "Uma nota 3 em cada área",
       "em até 24 horas", "o modelo mais barato", "usar trechos menores", "apenas a primeira página"],
'nl': ["Wat is de snelheidslimiet van de Batch API?", "Hoe stream ik antwoorden van het Chat Completions-eindpunt?",
       "Welk embeddingmodel is het goedkoopst voor semantisch zoeken?", "waarom geeft mijn functieaanroep ongeldige json terug",
       "Wanneer moet je een model bijtrainen in plaats van een betere prompt te schrijven?", "Wat verandert de parameter temperature?",
       "hoe tel je tokens voordat je een verzoek verstuurt", "Welke vectordatabases laat het kookboek zien?",
       "Antwoorden komen binnen 24 uur terug.", "Het bewijs wordt woord voor woord uit de passage gekopieerd.",
       "opnieuw proberen met exponentiële wachttijd", "Een score van 3 op elk gebied",
       "binnen 24 uur", "het goedkoopste model", "kleinere stukken gebruiken", "alleen de eerste pagina"],
}
LANGS = list(TEXTS)

def size(mod):
    spec = importlib.util.find_spec(mod)
    if spec is None: return None
    root = Path(spec.origin).parent
    return sum(p.stat().st_size for p in root.rglob('*') if p.is_file()) / 1e6

def py3langid_fns():
    from py3langid.langid import LanguageIdentifier, MODEL_FILE
    full = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    few = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True); few.set_languages(LANGS)
    return {'py3langid (97 languages)': lambda t: full.classify(t)[0], 'py3langid (7 languages)': lambda t: few.classify(t)[0]}

def lingua_fns():
    from lingua import Language, LanguageDetectorBuilder
    t0 = time.perf_counter()
    full = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()
    few = LanguageDetectorBuilder.from_iso_codes_639_1(*[getattr(__import__('lingua').IsoCode639_1, l.upper()) for l in LANGS]).build()
    print(f"lingua: loading all models {time.perf_counter() - t0:.1f} s")
    iso = lambda l: l.iso_code_639_1.name.lower() if l else None
    return {'lingua (75 languages)': lambda t: iso(full.detect_language_of(t)), 'lingua (7 languages)': lambda t: iso(few.detect_language_of(t))}

def main():
    fns = {}
    for mod, make in [('py3langid', py3langid_fns), ('lingua', lingua_fns)]:
        if importlib.util.find_spec(mod): fns.update(make())
        else: print(f"{mod}: not installed")
    items = [(l, t) for l in LANGS for t in TEXTS[l]]
    print(f"{len(items)} texts, {len(LANGS)} languages; sizes: " +
          ', '.join(f"{m} {size(m):.1f} MB" for m in ('py3langid', 'lingua') if size(m)))
    print(f"{'library':26s} {'all':>6s} {'1-4 words':>10s} {'5+ words':>9s} {'ms/text':>8s}  errors")
    for name, f in fns.items():
        f(items[0][1])  # warm up (lazy model loading)
        t0 = time.perf_counter(); got = [f(t) for _, t in items]; dt = (time.perf_counter() - t0) / len(items) * 1000
        ok = [g == l for (l, _), g in zip(items, got)]
        short = [o for o, (_, t) in zip(ok, items) if len(t.split()) <= 4]
        long_ = [o for o, (_, t) in zip(ok, items) if len(t.split()) > 4]
        errs = [f"{l}->{g}: {t[:30]}" for (l, t), g, o in zip(items, got, ok) if not o]
        print(f"{name:26s} {sum(ok)/len(ok):6.1%} {sum(short)/len(short):10.1%} {sum(long_)/len(long_):9.1%} {dt:8.2f}  {len(errs)}")
        for e in errs[:6]: print('    ', e)

if __name__ == '__main__': main()
